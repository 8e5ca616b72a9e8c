//! The `mcpwire` command (crate `mcpwire-cli`): [`main`] runs it. It is a library only so that
//! the command's own tests can drive `tunnel run`'s configuration and health listener
//! ([`tunnel_run`]); to embed mcpwire, use the `mcpwire` crate instead.
//!
//! - `client`: `mcpwire client`, an MCP client for people and scripts;
//! - [`tunnel_run`]: `mcpwire tunnel run` (flags and environment compatible with the Go
//!   tunnel-client, the health endpoints, signals) on top of a driver of the `mcpwire` crate;
//! - `host`: `mcpwire host`, many servers from a config file, the tool catalog and search,
//!   calls through the consent policy;
//! - `dev`: `mcpwire dev`, the local dev servers of the `mcpwire-dev` crate as commands;
//! - `tunnel_demo`: `mcpwire tunnel demo`, the engine alone on a virtual clock;
//! - `loopback_demo`: `mcpwire demo`, the whole tunnel path on loopback sockets in one process;
//! - `conformance_client`: `mcpwire conformance-client`, the client the official MCP
//!   conformance runner starts (hidden from `--help`);
//! - `conformance_server`: the server (on the server core) the runner's server scenarios
//!   test, run by the separate `mcpwire-conformance-server` binary (test scaffolding: not in
//!   the shipped `mcpwire`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// The flags' doc comments are their `--help` texts, where a URL is plain text.
#![allow(rustdoc::bare_urls)]

mod client;
mod conformance_client;
#[doc(hidden)]
pub mod conformance_server;
mod dev;
mod host;
mod loopback_demo;
mod tunnel_demo;
pub mod tunnel_run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mcpwire: an MCP client for people and scripts, and a Secure MCP Tunnel client that connects
/// a tunnel service to your MCP servers (a drop-in for the Go tunnel-client). Both speak MCP
/// 2026-07-28 and fall back to 2025-11-25; `mcpwire demo` shows the whole tunnel path on
/// loopback with no outside service.
#[derive(Parser, Debug)]
#[command(name = "mcpwire", version, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the whole tunnel path on loopback in this process: the reference MCP server, the
    /// local control plane and the tunnel client (blocking driver), then send MCP requests
    /// through it (tools/list, a call, progress over SSE, an expired response_timeout, a
    /// session termination) and print what went where and how long each took.
    Demo,
    /// The Secure MCP Tunnel client.
    Tunnel {
        #[command(subcommand)]
        command: TunnelCommand,
    },
    /// Local servers for trying the tunnel path and for tests: a reference MCP server and a
    /// local Secure MCP Tunnel control plane.
    Dev {
        #[command(subcommand)]
        command: crate::dev::DevCommand,
    },
    /// An MCP client: discover, list, call tools, read resources, get prompts, subscribe.
    Client(Box<crate::client::ClientArgs>),
    /// Many MCP servers at once from your config file (Claude Desktop, Claude Code, Cursor,
    /// VS Code): their tools under collision-free names, a tool search, and calls through a
    /// consent policy.
    Host(Box<crate::host::HostArgs>),
    /// The same as `mcpwire tunnel run` (the Go tunnel-client's `run`, so that unit files and
    /// container entrypoints written for it keep working).
    Run(Box<crate::tunnel_run::config::RunArgs>),
    /// Write a starter tunnel profile (see `mcpwire tunnel init --help`).
    #[command(hide = true)]
    Init(Box<crate::tunnel_run::init::InitArgs>),
    /// The client the official MCP conformance runner starts: it appends the test server's URL
    /// and names the scenario in MCP_CONFORMANCE_SCENARIO (hidden: not for people).
    #[command(hide = true)]
    ConformanceClient {
        /// The test server's URL.
        url: String,
    },
}

#[derive(Subcommand, Debug)]
enum TunnelCommand {
    /// Run the tunnel engine against an in-process control plane and MCP server (no network)
    /// and print what it does: polls, forwards, notifications, responses, deadlines, retries.
    Demo,
    /// Run the tunnel client: poll the control plane, forward commands to the MCP servers,
    /// post their responses (flags compatible with the Go tunnel-client).
    Run(Box<crate::tunnel_run::config::RunArgs>),
    /// Write a starter profile for `mcpwire tunnel run --profile NAME` (the Go client's
    /// samples: an HTTP or stdio MCP server, optionally behind an enterprise proxy).
    Init(Box<crate::tunnel_run::init::InitArgs>),
    /// Probe a running tunnel client's health listener (/healthz, /readyz, optionally one
    /// successful poll and its process) for container health checks: exit 2 when not ok.
    Health(crate::tunnel_run::probe::HealthArgs),
    /// Check a `tunnel run` configuration before starting it: the config's sources, the tunnel
    /// id, the key (never shown), the control plane reachable and the key accepted, each MCP
    /// server or stdio command, cloudflared, the health listener (exit 2 when one fails).
    Doctor(Box<crate::tunnel_run::doctor::DoctorArgs>),
}

/// Runs the `mcpwire` command with this process's arguments; its exit status.
pub fn main() -> ExitCode {
    let (argv, stdio_command) = crate::client::split_stdio_command(std::env::args_os().collect());
    let cli = Cli::parse_from(argv);
    match cli.command {
        Command::Demo => run_loopback_demo(),
        Command::Tunnel {
            command: TunnelCommand::Demo,
        } => match crate::tunnel_demo::run() {
            Ok((transcript, _)) => {
                print!("{transcript}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("mcpwire: the demo failed: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Tunnel {
            command: TunnelCommand::Run(args),
        }
        | Command::Run(args) => crate::tunnel_run::run(&args),
        Command::Tunnel {
            command: TunnelCommand::Init(args),
        }
        | Command::Init(args) => crate::tunnel_run::init::run(&args),
        Command::Tunnel {
            command: TunnelCommand::Health(args),
        } => crate::tunnel_run::probe::run(&args),
        Command::Tunnel {
            command: TunnelCommand::Doctor(args),
        } => crate::tunnel_run::doctor::run(&args),
        Command::Dev { command } => crate::dev::run(command),
        Command::Client(mut args) => {
            args.set_trailing_command(stdio_command);
            crate::client::run(*args)
        }
        Command::Host(args) => crate::host::run(*args),
        Command::ConformanceClient { url } => crate::conformance_client::run(&url),
    }
}

fn run_loopback_demo() -> ExitCode {
    let mut out = std::io::stdout();
    match crate::loopback_demo::run(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire demo: {e}");
            ExitCode::FAILURE
        }
    }
}

//! The `mcpwire` command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mcpwire: an MCP client core and a Secure MCP Tunnel client.
#[derive(Parser, Debug)]
#[command(name = "mcpwire", version, about, long_about = None)]
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
        command: mcpwire_drivers::dev::cli::DevCommand,
    },
    /// An MCP client: discover, list, call tools, read resources, get prompts, subscribe.
    #[cfg(feature = "blocking")]
    Client(Box<mcpwire_drivers::client_cli::ClientArgs>),
    /// The client the official MCP conformance runner starts: it appends the test server's URL
    /// and names the scenario in MCP_CONFORMANCE_SCENARIO (hidden: not for people).
    #[cfg(feature = "blocking")]
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
    Run(Box<mcpwire_drivers::tunnel_run::config::RunArgs>),
}

fn main() -> ExitCode {
    #[cfg(feature = "blocking")]
    let (argv, stdio_command) =
        mcpwire_drivers::client_cli::split_stdio_command(std::env::args_os().collect());
    #[cfg(not(feature = "blocking"))]
    let argv = std::env::args_os();
    let cli = Cli::parse_from(argv);
    match cli.command {
        Command::Demo => run_loopback_demo(),
        Command::Tunnel {
            command: TunnelCommand::Demo,
        } => match mcpwire_drivers::demo::run() {
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
        } => mcpwire_drivers::tunnel_run::run(&args),
        Command::Dev { command } => mcpwire_drivers::dev::cli::run(command),
        #[cfg(feature = "blocking")]
        Command::Client(mut args) => {
            args.set_trailing_command(stdio_command);
            mcpwire_drivers::client_cli::run(*args)
        }
        #[cfg(feature = "blocking")]
        Command::ConformanceClient { url } => mcpwire_drivers::conformance_client::run(&url),
    }
}

#[cfg(feature = "blocking")]
fn run_loopback_demo() -> ExitCode {
    let mut out = std::io::stdout();
    match mcpwire_drivers::loopback_demo::run(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpwire demo: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "blocking"))]
fn run_loopback_demo() -> ExitCode {
    eprintln!("mcpwire demo: this binary was built without the blocking driver it uses");
    ExitCode::FAILURE
}

//! The `mcpwire` command; everything it does is in the `mcpwire_cli` library ([`mcpwire_cli::main`]).

fn main() -> std::process::ExitCode {
    mcpwire_cli::main()
}

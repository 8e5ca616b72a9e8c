//! `mcpwire tunnel run`: the tunnel client on the network, a drop-in for the Go tunnel-client.
//!
//! [`config`] resolves flags and environment variables into the library's
//! [`TunnelConfig`](mcpwire::tunnel::TunnelConfig) plus this command's own settings; [`health`]
//! serves `/healthz`, `/readyz` and `/metrics` from the driver's [`Status`]; the driver chosen
//! with `--driver` (the `mcpwire` crate's `tunnel::blocking` or `tunnel::smol`) runs the
//! tunnel, writing redacted one-line logs; [`signals`] stops it on SIGINT/SIGTERM.

pub mod config;
pub mod config_file;
pub mod health;
pub mod signals;

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;

use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::Status;

use self::config::{Driver, RunArgs};

/// Runs `mcpwire tunnel run`: exit 0 after a signal and the grace period, 2 for a bad setting,
/// 1 when the client cannot start.
pub fn run(args: &RunArgs) -> ExitCode {
    let read_file = |p: &str| std::fs::read_to_string(p);
    let config = match config::resolve(args, &|k| std::env::var(k).ok(), &read_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpwire: {e}");
            return ExitCode::from(2);
        }
    };
    let secrets = vec![config.tunnel.engine.api_key.expose().to_owned()];
    let log = Arc::new(Logger::stderr(config.log_level, config.log_json, secrets));
    let listener = match TcpListener::bind(config.health_addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "mcpwire: invalid --health.listen-addr {}: cannot listen there: {e}",
                config.health_addr
            );
            return ExitCode::from(2);
        }
    };
    let addr = listener
        .local_addr()
        .map_or_else(|_| config.health_addr.to_string(), |a| a.to_string());
    let status = Status::new();
    health::serve(listener, Arc::clone(&status));
    log.log(Level::Info, "health listener", &[("addr", &addr)]);
    let tunnel = config.tunnel;
    let result = match config.driver {
        Driver::Blocking => {
            mcpwire::tunnel::blocking::run(tunnel, Arc::clone(&log), status, signals::watch)
        }
        Driver::Smol => {
            mcpwire::tunnel::smol::run(tunnel, Arc::clone(&log), status, signals::watch)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log.log(
                Level::Error,
                "the tunnel client stopped on an error",
                &[("error", &e)],
            );
            ExitCode::FAILURE
        }
    }
}

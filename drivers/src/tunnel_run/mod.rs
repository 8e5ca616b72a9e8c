//! `mcpwire tunnel run`: the tunnel client on the network, a drop-in for the Go tunnel-client.
//!
//! [`config`] resolves flags and environment variables; [`health`] serves `/healthz`,
//! `/readyz` and `/metrics`; [`log`] writes redacted one-line logs; the driver chosen with
//! `--driver` runs the engine, on the loop state both drivers share (`driver_core`); [`stop`]
//! stops it (on a signal, or from an embedding program).

pub mod config;
#[cfg(any(feature = "blocking", feature = "smol"))]
pub mod driver_core;
pub mod health;
pub mod log;
pub mod report;
pub mod stop;

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;

use self::config::{Driver, RunArgs};
use self::health::Status;
use self::log::{Level, Logger};

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
    #[cfg(not(feature = "smol"))]
    if config.driver == Driver::Smol {
        eprintln!(
            "mcpwire: invalid --driver \"smol\": this binary was built without the smol feature; use --driver blocking"
        );
        return ExitCode::from(2);
    }
    #[cfg(not(feature = "blocking"))]
    if config.driver == Driver::Blocking {
        eprintln!(
            "mcpwire: invalid --driver \"blocking\": this binary was built without the blocking feature; use --driver smol"
        );
        return ExitCode::from(2);
    }
    let secrets = vec![config.engine.api_key.expose().to_owned()];
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
    let result = match config.driver {
        #[cfg(feature = "blocking")]
        Driver::Blocking => crate::blocking::run(config, Arc::clone(&log), status),
        #[cfg(feature = "smol")]
        Driver::Smol => crate::smol::run(config, Arc::clone(&log), status),
        #[allow(unreachable_patterns)]
        _ => Err("this driver is not built into this binary".to_owned()),
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

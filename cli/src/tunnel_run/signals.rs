//! Signals for `mcpwire tunnel run`: SIGINT/SIGTERM each make a [`Stopper::stop`] call (the
//! first lets in-flight commands finish within the grace period, the second ends the run at
//! once); SIGUSR1 turns debug logging on and SIGUSR2 back to the configured level, for a running
//! client (the Go client changes its level from its admin UI).

use std::sync::Arc;
use std::thread;

use mcpwire::tunnel::log::{Level, Logger};
use mcpwire::tunnel::Stopper;

/// Installs the handlers and answers the signals from a thread of its own until the tunnel has
/// stopped: the driver's `on_start` hook (`configured` is `--log.level`). An error says the
/// handlers could not be installed.
pub fn watch(stopper: Stopper, log: Arc<Logger>, configured: Level) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    let install = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("cannot install signal handlers: {e}"))
    };
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGUSR2])
        .map_err(install)?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let level = match signal {
                    SIGUSR1 => Level::Debug,
                    SIGUSR2 => configured,
                    _ => {
                        if !stopper.stop() {
                            return;
                        }
                        continue;
                    }
                };
                set_level(
                    &log,
                    level,
                    if signal == SIGUSR1 {
                        "SIGUSR1"
                    } else {
                        "SIGUSR2"
                    },
                );
            }
        })
        .map_err(install)?;
    Ok(())
}

/// Changes the running client's log level and says so with a warning (seen at every level but
/// `error`).
pub fn set_level(log: &Logger, level: Level, by: &str) {
    let previous = log.set_level(level);
    log.log(
        Level::Warn,
        "runtime log level updated",
        &[
            ("previous_level", &previous.as_str()),
            ("new_level", &level.as_str()),
            ("by", &by),
        ],
    );
}

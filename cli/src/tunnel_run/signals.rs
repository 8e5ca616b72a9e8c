//! SIGINT/SIGTERM for `mcpwire tunnel run`: each one is a [`Stopper::stop`] call (the first
//! lets in-flight commands finish within the grace period, the second ends the run at once).

use std::thread;

use mcpwire::tunnel::Stopper;

/// Calls [`Stopper::stop`] on each SIGINT or SIGTERM, from a thread of its own, until the
/// tunnel has stopped. The driver's `on_start` hook: an error says the handlers could not be
/// installed.
pub fn watch(stopper: Stopper) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let install = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("cannot install signal handlers: {e}"))
    };
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(install)?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if !stopper.stop() {
                    return;
                }
            }
        })
        .map_err(install)?;
    Ok(())
}

//! Stopping a running tunnel: [`Stopper`], the handle both drivers hand to their embedder, and
//! [`watch_signals`], which turns SIGINT/SIGTERM into [`Stopper::stop`] calls.

use std::sync::Arc;
use std::thread;

/// Stops a tunnel started with a driver's `run_with` as SIGTERM would: polling stops,
/// in-flight commands finish within the grace period, then `run_with` returns. A second `stop`
/// ends it at once.
///
/// `stop` may wait while the driver's completion queue is full, so call it from an ordinary
/// thread, not from inside the driver's own executor.
#[derive(Clone)]
pub struct Stopper(Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stopper")
    }
}

impl Stopper {
    /// A stopper that calls `signal` for each stop request; `signal` returns false once the
    /// tunnel has stopped.
    pub fn new(signal: impl Fn() -> bool + Send + Sync + 'static) -> Stopper {
        Stopper(Arc::new(signal))
    }

    /// Asks the tunnel to stop; false when it has already stopped.
    pub fn stop(&self) -> bool {
        (self.0)()
    }
}

/// Calls [`Stopper::stop`] on each SIGINT or SIGTERM, from a thread of its own, until the
/// tunnel has stopped.
pub fn watch_signals(stopper: Stopper) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if !stopper.stop() {
                    return;
                }
            }
        })?;
    Ok(())
}

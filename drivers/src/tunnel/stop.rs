//! Stopping a running tunnel: [`Stopper`], the handle both drivers hand to their embedder (the
//! `mcpwire` command calls it on SIGINT/SIGTERM).

use std::sync::Arc;

/// Stops a tunnel started with a driver's `run` as SIGTERM would: polling stops,
/// in-flight commands finish within the grace period, then `run` returns. A second `stop`
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

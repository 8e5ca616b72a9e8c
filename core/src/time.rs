//! The time types of every `handle_*` and `poll_timeout`: `Instant` for deadlines and TTLs,
//! `SystemTime` only where the protocol speaks wall time (`Retry-After` HTTP-dates, token
//! expiry). They are the `web-time` crate's, which are `std::time`'s own on every target but
//! `wasm32-unknown-unknown`, where `std::time::Instant::now()` panics and `web-time` reads the
//! browser's `performance.now()` instead. So a native embedder passes `std::time::Instant::now()`
//! as before, and a browser embedder passes `mcpwire_core::time::Instant::now()`.
//!
//! The core itself never reads a clock: these are only the types of the values it is given.

pub use core::time::Duration;
pub use web_time::{Instant, SystemTime, UNIX_EPOCH};

/// `t` (a `std::time::SystemTime`, as the `httpdate` crate returns) as this crate's
/// [`SystemTime`]: the same instant, whichever type `SystemTime` is on this target.
/// `None` before the Unix epoch.
pub(crate) fn from_std(t: std::time::SystemTime) -> Option<SystemTime> {
    let since = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    UNIX_EPOCH.checked_add(since)
}

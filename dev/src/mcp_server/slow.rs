//! How many `slow` calls overlap: each call in flight records the largest number of `slow`
//! calls it saw in flight at once (itself included), so its answer can say how many ran beside
//! it over its own lifetime, not since the server started. [`SlowCalls::peak`] is the largest
//! number ever in flight at once.

use std::collections::HashMap;
use std::sync::Mutex;

use super::lock;

/// The `slow` calls in flight.
#[derive(Debug, Default)]
pub(super) struct SlowCalls(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    /// Each call in flight, by number, with the most calls it has seen in flight at once.
    active: HashMap<u64, usize>,
    /// The number of the next call.
    next: u64,
    /// The most calls ever in flight at once.
    peak: usize,
}

/// One `slow` call in flight: it leaves the count when dropped (answered, cancelled or
/// abandoned alike).
pub(super) struct SlowCall<'a> {
    calls: &'a SlowCalls,
    id: u64,
}

impl SlowCalls {
    /// A call starts: every call in flight (this one included) sees the new count.
    pub(super) fn start(&self) -> SlowCall<'_> {
        let mut s = lock(&self.0);
        let id = s.next;
        s.next += 1;
        s.active.insert(id, 0);
        let now = s.active.len();
        for seen in s.active.values_mut() {
            *seen = (*seen).max(now);
        }
        s.peak = s.peak.max(now);
        SlowCall { calls: self, id }
    }

    /// The most `slow` calls ever in flight at once.
    pub(super) fn peak(&self) -> u64 {
        lock(&self.0).peak as u64
    }
}

impl SlowCall<'_> {
    /// The most `slow` calls in flight at once since this one started, itself included.
    pub(super) fn overlapping(&self) -> usize {
        lock(&self.calls.0)
            .active
            .get(&self.id)
            .copied()
            .unwrap_or(1)
    }
}

impl Drop for SlowCall<'_> {
    fn drop(&mut self) {
        lock(&self.calls.0).active.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_reports_the_peak_of_its_own_lifetime() {
        let calls = SlowCalls::default();
        let a = calls.start();
        let b = calls.start();
        assert_eq!(a.overlapping(), 2);
        drop(b);
        // A call that starts after the peak never saw it.
        let c = calls.start();
        assert_eq!(c.overlapping(), 2);
        assert_eq!(a.overlapping(), 2);
        drop(a);
        drop(c);
        let d = calls.start();
        assert_eq!(d.overlapping(), 1);
        let e = calls.start();
        let f = calls.start();
        assert_eq!(
            (d.overlapping(), e.overlapping(), f.overlapping()),
            (3, 3, 3)
        );
        assert_eq!(calls.peak(), 3);
        drop((d, e, f));
        assert_eq!(calls.start().overlapping(), 1);
        assert_eq!(calls.peak(), 3);
    }
}

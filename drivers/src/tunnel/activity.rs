//! What a running tunnel did lately, as bounded feeds: the commands it finished, Harpoon's
//! calls and (kept by the [`Logger`](super::Logger) when asked) its log lines. The report
//! stream that writes the log lines and counts the metrics pushes them, so an operator's page
//! shows the same facts as the log and `/metrics`, never a second bookkeeping.
//!
//! Every feed keeps its newest items up to its capacity; each item has a sequence number, so
//! a reader asks for what came after the last one it saw (and learns when it fell behind).
//! Nothing in a feed is a secret: records carry ids, names, outcomes and sizes, and log lines
//! are the redacted ones.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::log::Level;

/// The most recent commands kept.
pub const COMMANDS_KEPT: usize = 1000;
/// The most recent Harpoon calls kept.
pub const HARPOON_CALLS_KEPT: usize = 200;
/// The log lines kept by default (the Go client's `--admin-ui.log-buffer-events` default).
pub const LOG_LINES_KEPT: usize = 2000;

/// A bounded, numbered feed that readers can wait on.
#[derive(Debug)]
pub struct Feed<T> {
    inner: Mutex<Ring<T>>,
    changed: Condvar,
}

#[derive(Debug)]
struct Ring<T> {
    items: VecDeque<T>,
    /// The sequence number the next item gets (the first is 1).
    next: u64,
    capacity: usize,
}

/// What a reader got from a feed.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch<T> {
    /// The items after the asked-for sequence number, oldest first, with their numbers.
    pub items: Vec<(u64, T)>,
    /// The number of the newest item (0 when there is none yet): ask after it next time.
    pub last: u64,
    /// Items the reader missed: pushed after its number and already dropped.
    pub missed: u64,
}

impl<T: Clone> Feed<T> {
    /// An empty feed keeping at most `capacity` items (at least one).
    pub fn new(capacity: usize) -> Self {
        Feed {
            inner: Mutex::new(Ring {
                items: VecDeque::new(),
                next: 1,
                capacity: capacity.max(1),
            }),
            changed: Condvar::new(),
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `item` (dropping the oldest when full) and wakes the waiting readers; returns its
    /// sequence number.
    pub fn push(&self, item: T) -> u64 {
        let mut ring = self.ring();
        if ring.items.len() == ring.capacity {
            ring.items.pop_front();
        }
        ring.items.push_back(item);
        let seq = ring.next;
        ring.next += 1;
        drop(ring);
        self.changed.notify_all();
        seq
    }

    /// How many items it keeps at most.
    pub fn capacity(&self) -> usize {
        self.ring().capacity
    }

    /// The items after sequence number `after` (0 for all kept).
    pub fn after(&self, after: u64) -> Batch<T> {
        Self::batch(&self.ring(), after, usize::MAX)
    }

    /// The first `limit` items after sequence number `after` (only those are copied, under
    /// the feed's lock).
    pub fn after_at_most(&self, after: u64, limit: usize) -> Batch<T> {
        Self::batch(&self.ring(), after, limit)
    }

    /// The newest `n` items.
    pub fn newest(&self, n: usize) -> Batch<T> {
        let ring = self.ring();
        let last = ring.next - 1;
        Self::batch(&ring, last.saturating_sub(n as u64), usize::MAX)
    }

    /// Like [`after`](Self::after), but waits up to `timeout` for an item when there is none.
    pub fn wait_after(&self, after: u64, timeout: Duration) -> Batch<T> {
        let until = Instant::now() + timeout;
        let mut ring = self.ring();
        while ring.next - 1 <= after {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            ring = self
                .changed
                .wait_timeout(ring, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Self::batch(&ring, after, usize::MAX)
    }

    fn batch(ring: &Ring<T>, after: u64, limit: usize) -> Batch<T> {
        let last = ring.next - 1;
        let first = ring.next - ring.items.len() as u64;
        let from = after.saturating_add(1).max(first);
        let missed = first.saturating_sub(after.saturating_add(1));
        let skip = usize::try_from(from - first).unwrap_or(usize::MAX);
        let items = ring
            .items
            .iter()
            .skip(skip)
            .take(limit)
            .enumerate()
            .map(|(i, item)| (from + i as u64, item.clone()))
            .collect();
        Batch {
            items,
            last,
            missed,
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One finished command, as its `command` log line says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRecord {
    /// When it finished (Unix milliseconds).
    pub at_unix_ms: u64,
    /// The control plane's opaque request id.
    pub request_id: String,
    /// Its channel (`-` when it never reached a forward).
    pub channel: String,
    /// The JSON-RPC method (`-` when none).
    pub method: String,
    /// How it ended: `completed`, `failed`, `expired`, `delivery_failed`, ...
    pub outcome: &'static str,
    /// The terminal `resp_code` posted, when one was.
    pub resp_code: Option<u16>,
    /// Where a failure came from (`tunnel_failure.source`), when the tunnel made one.
    pub failure_source: Option<&'static str>,
    /// Its transport error kind (`tunnel_failure.transport_error_kind`), when known.
    pub failure_kind: Option<&'static str>,
    /// From the forward's start to the outcome, in milliseconds.
    pub duration_ms: u64,
    /// Response POSTs sent again after a failed attempt.
    pub post_retries: u32,
}

/// One Harpoon `call_target` call, by label: never a URL, a header value or a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HarpoonCallRecord {
    /// When it ended (Unix milliseconds).
    pub at_unix_ms: u64,
    /// The target's label.
    pub label: String,
    /// The HTTP status the target answered, when it did.
    pub status: Option<u16>,
    /// How the call ended.
    pub outcome: &'static str,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// The response body's size.
    pub response_bytes: u64,
}

/// One log line, as written (redacted), in parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// When it was written (Unix milliseconds).
    pub at_unix_ms: u64,
    /// Its level.
    pub level: Level,
    /// The message.
    pub msg: String,
    /// Its fields, in order.
    pub fields: Vec<(String, String)>,
}

/// The feeds a running tunnel fills (its [`Status`](super::Status) holds them).
#[derive(Debug)]
pub struct Activity {
    /// Finished commands.
    pub commands: Feed<CommandRecord>,
    /// Harpoon's calls.
    pub harpoon_calls: Feed<HarpoonCallRecord>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            commands: Feed::new(COMMANDS_KEPT),
            harpoon_calls: Feed::new(HARPOON_CALLS_KEPT),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_feed_keeps_its_newest_items_and_says_what_a_slow_reader_missed() {
        let feed = Feed::new(3);
        assert_eq!(feed.after(0).last, 0);
        for n in 1..=5 {
            assert_eq!(feed.push(n * 10), n);
        }
        let all = feed.after(0);
        assert_eq!(all.items, [(3, 30), (4, 40), (5, 50)]);
        assert_eq!((all.last, all.missed), (5, 2));
        let later = feed.after(4);
        assert_eq!(later.items, [(5, 50)]);
        assert_eq!(later.missed, 0);
        assert!(feed.after(5).items.is_empty());
        assert_eq!(feed.newest(2).items, [(4, 40), (5, 50)]);
        assert_eq!(feed.newest(2).missed, 0);
        // A bounded window: the oldest unseen first.
        let window = feed.after_at_most(0, 2);
        assert_eq!(window.items, [(3, 30), (4, 40)]);
        assert_eq!((window.last, window.missed), (5, 2));
    }

    #[test]
    fn a_waiting_reader_wakes_when_an_item_arrives() {
        let feed = std::sync::Arc::new(Feed::new(8));
        let writer = std::sync::Arc::clone(&feed);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            writer.push("x");
        });
        let got = feed.wait_after(0, Duration::from_secs(30));
        assert_eq!(got.items, [(1, "x")]);
        t.join().unwrap();
        // Nothing new: back empty when the wait ends.
        let none = feed.wait_after(1, Duration::from_millis(10));
        assert!(none.items.is_empty());
        assert_eq!(none.last, 1);
    }
}

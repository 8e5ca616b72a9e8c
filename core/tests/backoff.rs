//! `next_attempt` needs a real `Instant` base, which `core/src` may not read: these tests take
//! one `Instant::now()` and only ever add to it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mcpwire_core::backoff::{next_attempt, Backoff, Jitter};
use proptest::prelude::*;

const MS: fn(u64) -> Duration = Duration::from_millis;
const SECS: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn next_attempt_without_retry_after_waits_the_jittered_backoff() {
    let b = Backoff::default();
    let now = Instant::now();
    for attempt in 1..=10 {
        let at = next_attempt(&b, now, attempt, 12_345, None, None).unwrap();
        assert_eq!(at - now, b.delay(attempt, 12_345));
    }
}

#[test]
fn retry_after_is_a_minimum_delay() {
    let b = Backoff::default();
    let now = Instant::now();
    let mut jitter = Jitter::new(3);
    for attempt in 1..=10 {
        let random = jitter.next_u64();
        let at = next_attempt(&b, now, attempt, random, Some(SECS(5)), None).unwrap();
        assert!(at - now >= SECS(5));
        // ... with the jittered backoff added on top, not swallowed by it.
        assert_eq!(at - now, SECS(5) + b.delay(attempt, random));
    }
}

#[test]
fn retry_after_keeps_jitter_so_clients_do_not_retry_in_lockstep() {
    let b = Backoff::default();
    let now = Instant::now();
    // A hundred clients told "Retry-After: 5" at the same instant, each with its own seed.
    let instants: BTreeSet<_> = (0..100u64)
        .map(|seed| {
            let random = Jitter::new(seed).next_u64();
            next_attempt(&b, now, 1, random, Some(SECS(5)), None).unwrap()
        })
        .collect();
    assert!(
        instants.len() > 90,
        "only {} distinct instants",
        instants.len()
    );
    let spread = *instants.last().unwrap() - *instants.first().unwrap();
    assert!(spread >= MS(100), "spread {spread:?}");
}

#[test]
fn next_attempt_never_returns_an_instant_past_the_deadline() {
    let b = Backoff::default();
    let now = Instant::now();
    let wait = b.delay(1, 0); // 125 ms
    let exactly = now + wait;
    assert_eq!(
        next_attempt(&b, now, 1, 0, None, Some(exactly)),
        Some(exactly)
    );
    assert_eq!(
        next_attempt(&b, now, 1, 0, None, Some(exactly - Duration::from_nanos(1))),
        None
    );
    assert_eq!(next_attempt(&b, now, 1, 0, None, Some(now)), None);
}

#[test]
fn next_attempt_gives_up_when_retry_after_outlasts_the_deadline() {
    let b = Backoff::default();
    let now = Instant::now();
    // The backoff alone would fit; the server's minimum does not.
    assert!(next_attempt(&b, now, 1, 0, None, Some(now + SECS(3))).is_some());
    assert_eq!(
        next_attempt(&b, now, 1, 0, Some(SECS(5)), Some(now + SECS(3))),
        None
    );
}

#[test]
fn next_attempt_with_an_expired_deadline_gives_up() {
    let b = Backoff::default();
    let later = Instant::now() + SECS(10);
    let deadline = later - SECS(1);
    assert_eq!(next_attempt(&b, later, 1, 0, None, Some(deadline)), None);
}

#[test]
fn next_attempt_without_deadline_is_unbounded_by_it() {
    let b = Backoff::default();
    let now = Instant::now();
    let at = next_attempt(&b, now, 40, u64::MAX, Some(SECS(60)), None).unwrap();
    assert!(at - now <= SECS(90) && at - now >= SECS(75));
}

#[test]
fn next_attempt_beyond_the_representable_clock_gives_up() {
    let b = Backoff {
        initial: Duration::MAX,
        max: Duration::MAX,
        multiplier: 2,
    };
    assert_eq!(
        next_attempt(&b, Instant::now(), 1, u64::MAX, None, None),
        None
    );
}

proptest! {
    #[test]
    fn prop_next_attempt_is_never_past_the_deadline(
        initial_ms in 0u64..100_000,
        max_ms in 0u64..1_000_000,
        multiplier in any::<u32>(),
        attempt in any::<u32>(),
        random in any::<u64>(),
        retry_after_ms in proptest::option::of(0u64..200_000),
        deadline_ms in proptest::option::of(0u64..2_000_000),
    ) {
        let b = Backoff { initial: MS(initial_ms), max: MS(max_ms), multiplier };
        let now = Instant::now();
        let retry_after = retry_after_ms.map(MS);
        let deadline = deadline_ms.map(|ms| now + MS(ms));
        match next_attempt(&b, now, attempt, random, retry_after, deadline) {
            Some(at) => {
                if let Some(deadline) = deadline {
                    prop_assert!(at <= deadline);
                }
                prop_assert!(at >= now + retry_after.unwrap_or_default());
                prop_assert!(at >= now + b.delay(attempt, random));
            }
            None => {
                // Only a deadline can make it give up at these magnitudes.
                let deadline = deadline.unwrap();
                let wanted = retry_after.unwrap_or_default() + b.delay(attempt, random);
                prop_assert!(now + wanted > deadline);
            }
        }
    }
}

/// A "no limit" duration saturates far in the future instead of wrapping to `now`.
#[test]
fn saturating_add_never_falls_back_to_now() {
    let now = std::time::Instant::now();
    let far = mcpwire_core::backoff::saturating_add(now, std::time::Duration::MAX);
    assert!(far > now + std::time::Duration::from_secs(100 * 365 * 24 * 3600));
    let d = std::time::Duration::from_secs(5);
    assert_eq!(mcpwire_core::backoff::saturating_add(now, d), now + d);
}

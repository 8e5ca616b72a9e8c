//! `Retry-After` parsing and backoff delays on arbitrary input.
//!
//! Invariants checked on every run:
//! - `parse_retry_after` never panics and never returns more than the cap;
//! - a value that is all ASCII digits (after optional spaces/tabs) is always accepted, as
//!   `min(n seconds, cap)`, with an overflowing `n` read as "very large" (capped);
//! - an arbitrary `u64` written as digits, with optional whitespace around it, round-trips;
//! - anything else that is accepted is a date strictly after the wall clock: never a zero delay
//!   unless the cap is zero;
//! - `Backoff::delay` stays within `[ceiling/2, ceiling]` and `retry_delay` never undercuts the
//!   Retry-After it was given.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcpwire_core::backoff::{parse_retry_after, retry_delay, Backoff};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    value: &'a str,
    wall_secs: u64,
    wall_nanos: u32,
    cap_millis: u64,
    number: u64,
    leading_ws: u8,
    trailing_ws: u8,
    initial_nanos: u64,
    max_nanos: u64,
    multiplier: u32,
    attempt: u32,
    random: u64,
}

fn ows(bits: u8) -> String {
    (0..bits % 4)
        .map(|i| if bits >> (i + 2) & 1 == 1 { '\t' } else { ' ' })
        .collect()
}

fuzz_target!(|input: Input<'_>| {
    let now = UNIX_EPOCH
        .checked_add(Duration::new(
            input.wall_secs,
            input.wall_nanos % 1_000_000_000,
        ))
        .unwrap_or(UNIX_EPOCH);
    let cap = Duration::from_millis(input.cap_millis);

    // Arbitrary text.
    let parsed = parse_retry_after(input.value, now, cap);
    if let Some(d) = parsed {
        assert!(d <= cap, "{:?} -> {d:?} above cap {cap:?}", input.value);
    }
    let trimmed = input.value.trim_matches([' ', '\t']);
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let secs = trimmed
            .parse::<u64>()
            .map_or(Duration::MAX, Duration::from_secs);
        assert_eq!(parsed, Some(secs.min(cap)), "{:?}", input.value);
    } else if let Some(d) = parsed {
        // Only an HTTP-date strictly in the future gets here.
        assert!(
            !d.is_zero() || cap.is_zero(),
            "{:?} -> zero delay",
            input.value
        );
        assert!(!trimmed.is_empty());
    }

    // A pure digit string round-trips.
    let digits = format!(
        "{}{}{}",
        ows(input.leading_ws),
        input.number,
        ows(input.trailing_ws)
    );
    assert_eq!(
        parse_retry_after(&digits, now, cap),
        Some(Duration::from_secs(input.number).min(cap)),
        "{digits:?}"
    );

    // Backoff bounds on the same arbitrary numbers.
    let backoff = Backoff {
        initial: Duration::from_nanos(input.initial_nanos),
        max: Duration::from_nanos(input.max_nanos),
        multiplier: input.multiplier,
    };
    let ceiling = backoff.ceiling(input.attempt);
    let delay = backoff.delay(input.attempt, input.random);
    assert!(delay <= ceiling && delay >= ceiling / 2);
    assert!(ceiling <= backoff.ceiling(input.attempt.saturating_add(1)));
    let wait = retry_delay(&backoff, input.attempt, input.random, parsed);
    assert!(wait >= parsed.unwrap_or_default() && wait >= delay);
});

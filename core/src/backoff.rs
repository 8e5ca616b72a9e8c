//! `backoff`: bounded exponential backoff with injected jitter, and the `Retry-After` header.
//!
//! The tunnel contract (`protocol.md`, "Errors, retries, and concurrency") asks for retries with
//! "bounded exponential backoff and jitter", and says that when a retry is allowed, a `429` or
//! `503` may carry `Retry-After`, which is "a minimum delay in addition to local backoff and
//! jitter"; malformed, negative and expired values are ignored, excessive ones are capped, and no
//! wait may outlast cancellation or the command deadline.
//!
//! Nothing here reads a clock or draws a random number. The monotonic `now` ([`Instant`]), the
//! wall-clock `now_wall` ([`SystemTime`], only to read HTTP-dates) and the random word behind
//! the jitter are all arguments. [`Jitter`] is a tiny seeded generator a state machine can own, so
//! that it needs no random source of its own and a test can replay it.
//!
//! # The delay before retry `n`
//!
//! [`Backoff::ceiling`] is `d = min(initial * multiplier^(n-1), max)`, computed without
//! overflow. [`Backoff::delay`] applies *equal jitter*: a value drawn uniformly from
//! `[ceil(d/2), d]`, so half of the backoff is guaranteed and half is spread out.
//!
//! # How `Retry-After` combines with the backoff
//!
//! We read "a minimum delay in addition to local backoff and jitter" literally: the server's value
//! is a floor, and the jittered local backoff is **added on top of it**:
//!
//! ```text
//! wait = retry_after + backoff.delay(attempt, random)      (saturating)
//! ```
//!
//! - It never waits less than `Retry-After` (the delay is never negative).
//! - It keeps the jitter. The Go reference client (`openai/tunnel-client`) waits
//!   `max(jittered backoff, Retry-After)` instead: whenever the server's value is the larger one,
//!   the jitter disappears, and every client that got `Retry-After: 5` from an overloaded
//!   service at the same moment comes back in the same instant: the thundering herd the jitter
//!   was there to prevent. Adding the jittered backoff spreads those clients over
//!   `[Retry-After + d/2, Retry-After + d]`.
//! - The price is a longer wait: at most the `Retry-After` cap ([`DEFAULT_RETRY_AFTER_CAP`], 60 s)
//!   plus the backoff ceiling (30 s by default), and never beyond the deadline.
//!
//! [`retry_delay`] computes that sum; [`next_attempt`] turns it into an instant and refuses
//! (returns `None`) when that instant would be past the command deadline. Cancellation is the
//! driver's business: it wakes its sleep early, and the engine drops the retry.
//!
//! # `Retry-After` values
//!
//! [`parse_retry_after`] takes one field value (RFC 9110, section 10.2.3):
//! `Retry-After = HTTP-date / delay-seconds`, with `delay-seconds = 1*DIGIT`.
//! - Optional whitespace (spaces and horizontal tabs) around the value is ignored.
//! - Digits only: that many seconds. A digit string too long for a `u64` is still valid
//!   `delay-seconds`, only very large, so it is capped like any other excessive value (RFC 9111,
//!   section 1.2.2 likewise tells caches to clamp an overflowing delta rather than drop it).
//!   `0` is valid and adds nothing.
//! - Anything else must be an HTTP-date in one of the three forms RFC 9110 lets a recipient
//!   accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
//!   (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`), parsed by the
//!   `httpdate` crate (which also rejects a weekday that does not match the date). The delay is
//!   the date minus `now_wall`; a date at or before `now_wall` has expired and is ignored.
//! - Signs (`-1`, `+1`), fractions (`1.5`), units (`5s`), control or non-ASCII characters, and
//!   the empty string are malformed and ignored.
//! - Every accepted value is capped at the caller's `cap`.
//!
//! `Retry-After` is a singleton field; [`retry_after_from_headers`] ignores a response that
//! carries it more than once, since there is no telling which value the server meant.

use crate::time::{Duration, Instant, SystemTime};

use crate::http::Headers;

/// Default cap on a Retry-After value.
///
/// One minute, as in the Go reference client: long enough to honour a real rate limit, short
/// enough that one response cannot park a client indefinitely.
pub const DEFAULT_RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// Exponential backoff policy.
///
/// Retry `n` (1 = the first retry) waits a jittered share of
/// `min(initial * multiplier^(n-1), max)`; see [`Backoff::ceiling`] and [`Backoff::delay`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The ceiling of the first retry's delay. Default 250 ms.
    pub initial: Duration,
    /// The cap on the exponential part. Default 30 s. A value below `initial` is read as
    /// `initial`: the cap never undercuts the first delay (a zero cap would otherwise turn a
    /// misconfiguration into a tight retry loop).
    pub max: Duration,
    /// The growth factor between attempts. Default 2. `0` is read as `1` (a constant delay).
    pub multiplier: u32,
}

impl Default for Backoff {
    /// 250 ms doubling up to 30 s.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(30),
            multiplier: 2,
        }
    }
}

impl Backoff {
    /// The un-jittered delay ceiling `d` of retry number `attempt` (1 = first retry; 0 is read as
    /// 1): `min(initial * multiplier^(attempt-1), max(max, initial))`.
    ///
    /// Exact (no floating point) and saturating: any `attempt` is fine, and the result never
    /// decreases as `attempt` grows.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let cap = self.max.max(self.initial);
        let factor = self.multiplier.max(1);
        let mut d = self.initial;
        if factor > 1 && !d.is_zero() {
            // d at least doubles each round, so this ends within ~95 rounds for any
            // `attempt`: once d reaches the cap, or once the next step would overflow.
            for _ in 1..attempt {
                if d >= cap {
                    break;
                }
                d = match d.checked_mul(factor) {
                    Some(next) => next,
                    None => return cap,
                };
            }
        }
        d.min(cap)
    }

    /// The delay before retry number `attempt` (1 = first retry), with jitter drawn from `random`
    /// (any u64, e.g. from [`Jitter::next_u64`]).
    ///
    /// Equal jitter: uniform (up to a negligible modulo bias) in `[ceil(d/2), d]` where
    /// `d = self.ceiling(attempt)`; never zero when `initial > 0`; saturating, never panics for
    /// any attempt.
    pub fn delay(&self, attempt: u32, random: u64) -> Duration {
        let d = self.ceiling(attempt).as_nanos();
        let low = d - d / 2; // ceil(d/2): 1 ns of ceiling still waits 1 ns
        let span = d - low; // floor(d/2)
        let offset = u128::from(random) % (span + 1);
        duration_from_nanos(low + offset)
    }
}

/// Builds a [`Duration`] from a nanosecond count that came from a `Duration` (so it fits).
fn duration_from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let subsec = (nanos % NANOS_PER_SEC) as u32; // < 10^9, always fits
    match u64::try_from(nanos / NANOS_PER_SEC) {
        Ok(secs) => Duration::new(secs, subsec),
        Err(_) => Duration::MAX,
    }
}

/// A small deterministic PRNG (splitmix64) seeded by the caller, so a state machine can draw
/// jitter without an RNG inside.
///
/// Not for secrets: it is predictable by design. Seed it from the driver's random source so
/// that different clients spread out; a fixed seed replays the same sequence in tests.
#[derive(Clone, Debug)]
pub struct Jitter {
    state: u64,
}

impl Jitter {
    /// A generator whose sequence is fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits (Steele, Lea and Flood's splitmix64 step).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Parses a Retry-After header value: delta-seconds (1*DIGIT) or an HTTP-date (IMF-fixdate and
/// the two obsolete forms, via the `httpdate` crate), relative to the wall clock `now_wall`
/// passed in.
///
/// Returns `None` for malformed, negative (e.g. `"-5"`), fractional, or already-expired (date at
/// or before `now_wall`) values; caps excessive values at `cap`, including digit strings too long
/// for a `u64` (capped, not `None`). `"0"` is valid: `Some(Duration::ZERO)`. Leading/trailing
/// optional whitespace (spaces, tabs) is tolerated per RFC 9110. See the module docs.
pub fn parse_retry_after(value: &str, now_wall: SystemTime, cap: Duration) -> Option<Duration> {
    let value = value.trim_matches([' ', '\t']);
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits and non-empty, so the only possible parse error is overflow.
        let delay = value
            .parse::<u64>()
            .map_or(Duration::MAX, Duration::from_secs);
        return Some(delay.min(cap));
    }
    // An HTTP-date is visible ASCII and spaces only; `httpdate` would also strip CR, LF and
    // friends at the edges, which a field value may not contain.
    if !value.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return None;
    }
    let date = crate::time::from_std(httpdate::parse_http_date(value).ok()?)?;
    let ahead = date.duration_since(now_wall).ok()?;
    if ahead.is_zero() {
        return None;
    }
    Some(ahead.min(cap))
}

/// The `Retry-After` of a response's headers, parsed by [`parse_retry_after`].
///
/// `None` when the field is absent, invalid, or present more than once (it is a singleton
/// field). Whether to honour it at all (only on `429` and `503`, only when a retry is allowed)
/// is the caller's decision.
pub fn retry_after_from_headers(
    headers: &Headers,
    now_wall: SystemTime,
    cap: Duration,
) -> Option<Duration> {
    let mut values = headers.get_all("retry-after");
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    parse_retry_after(value, now_wall, cap)
}

/// How long to wait before retry number `attempt`: the jittered backoff, plus `retry_after` when
/// the server sent one (saturating).
///
/// The server's value is a floor that the local backoff and its jitter are added to, so the wait
/// is never shorter than `Retry-After` and clients still spread out; see the module docs.
pub fn retry_delay(
    backoff: &Backoff,
    attempt: u32,
    random: u64,
    retry_after: Option<Duration>,
) -> Duration {
    let local = backoff.delay(attempt, random);
    match retry_after {
        Some(floor) => floor.saturating_add(local),
        None => local,
    }
}

/// The instant of the next attempt:
/// `now + retry_after.unwrap_or(0) + backoff.delay(attempt, random)` (see [`retry_delay`] and the
/// module docs for why `Retry-After` is added to, not maxed with, the jittered backoff).
///
/// Returns `None` when that instant would be past `deadline` (never wait past a deadline; an
/// attempt exactly at the deadline is still allowed), or cannot be represented at all: the
/// caller then gives up. `retry_after` is used as given; cap it when parsing.
pub fn next_attempt(
    backoff: &Backoff,
    now: Instant,
    attempt: u32,
    random: u64,
    retry_after: Option<Duration>,
    deadline: Option<Instant>,
) -> Option<Instant> {
    let at = now.checked_add(retry_delay(backoff, attempt, random, retry_after))?;
    match deadline {
        Some(deadline) if at > deadline => None,
        _ => Some(at),
    }
}

/// `at + d`, or the latest instant this platform can represent past `at` when the sum overflows:
/// a "no limit" duration such as `Duration::MAX` must mean "far in the future", never "now".
pub fn saturating_add(at: Instant, d: Duration) -> Instant {
    if let Some(t) = at.checked_add(d) {
        return t;
    }
    // Halve the step until it fits, then keep adding what still fits (at most ~128 rounds).
    let mut t = at;
    let mut step = d;
    while !step.is_zero() {
        match t.checked_add(step) {
            Some(next) => t = next,
            None => step /= 2,
        }
    }
    t
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::time::UNIX_EPOCH;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;
    const SECS: fn(u64) -> Duration = Duration::from_secs;

    /// 2024-01-01T00:00:00Z, a Monday.
    fn wall() -> SystemTime {
        UNIX_EPOCH + SECS(1_704_067_200)
    }

    // ---- Backoff -------------------------------------------------------------------------

    #[test]
    fn default_backoff_is_250ms_doubling_to_30s() {
        let b = Backoff::default();
        assert_eq!((b.initial, b.max, b.multiplier), (MS(250), SECS(30), 2));
    }

    #[test]
    fn delays_grow_exponentially_and_are_capped_at_max() {
        let b = Backoff::default();
        let ceilings: Vec<_> = (1..=10).map(|n| b.ceiling(n)).collect();
        assert_eq!(
            ceilings,
            [
                MS(250),
                MS(500),
                MS(1000),
                MS(2000),
                MS(4000),
                MS(8000),
                MS(16000),
                SECS(30),
                SECS(30),
                SECS(30)
            ]
        );
        // The jittered delay follows its ceiling: the top of the range is the ceiling itself.
        for n in 1..=10 {
            let d = b.ceiling(n);
            assert_eq!(b.delay(n, (d.as_nanos() / 2) as u64), d);
            assert_eq!(b.delay(n, 0), d / 2);
        }
    }

    #[test]
    fn multiplier_three_grows_by_three() {
        let b = Backoff {
            initial: MS(100),
            max: SECS(10),
            multiplier: 3,
        };
        assert_eq!(
            [
                b.ceiling(1),
                b.ceiling(2),
                b.ceiling(3),
                b.ceiling(4),
                b.ceiling(5)
            ],
            [MS(100), MS(300), MS(900), MS(2700), MS(8100)]
        );
        assert_eq!(b.ceiling(6), SECS(10));
    }

    #[test]
    fn attempt_zero_is_read_as_the_first_retry() {
        let b = Backoff::default();
        assert_eq!(b.ceiling(0), b.ceiling(1));
        assert_eq!(b.delay(0, 77), b.delay(1, 77));
    }

    #[test]
    fn jitter_stays_within_half_to_full_ceiling() {
        let b = Backoff::default();
        let mut jitter = Jitter::new(7);
        for n in 1..=12 {
            let d = b.ceiling(n);
            for _ in 0..200 {
                let delay = b.delay(n, jitter.next_u64());
                assert!(
                    delay >= d / 2 && delay <= d,
                    "attempt {n}: {delay:?} vs {d:?}"
                );
            }
        }
    }

    #[test]
    fn jitter_reaches_both_ends_of_the_equal_jitter_range() {
        let b = Backoff::default();
        // d = 250 ms: the range is [125 ms, 250 ms], 125_000_001 possible nanosecond values.
        assert_eq!(b.delay(1, 0), MS(125));
        assert_eq!(b.delay(1, 125_000_000), MS(250));
        assert_eq!(b.delay(1, 125_000_001), MS(125));
    }

    #[test]
    fn jittered_delays_differ_so_clients_do_not_retry_in_lockstep() {
        let b = Backoff::default();
        let delays: std::collections::BTreeSet<_> = (0..100u64)
            .map(|seed| b.delay(3, Jitter::new(seed).next_u64()))
            .collect();
        assert!(delays.len() > 90, "only {} distinct delays", delays.len());
    }

    #[test]
    fn huge_attempt_numbers_saturate_without_panic() {
        let b = Backoff::default();
        for n in [64, 65, 1000, u32::MAX - 1, u32::MAX] {
            assert_eq!(b.ceiling(n), SECS(30));
            let delay = b.delay(n, u64::MAX);
            assert!(delay >= SECS(15) && delay <= SECS(30));
        }
        // Even with no practical cap, the exponential part saturates instead of overflowing.
        let unbounded = Backoff {
            initial: Duration::from_nanos(1),
            max: Duration::MAX,
            multiplier: u32::MAX,
        };
        assert_eq!(unbounded.ceiling(u32::MAX), Duration::MAX);
        assert!(unbounded.delay(u32::MAX, u64::MAX) >= Duration::MAX / 2);
        assert_eq!(
            unbounded.ceiling(2),
            Duration::from_nanos(u64::from(u32::MAX))
        );
    }

    #[test]
    fn delay_is_never_zero_when_initial_is_positive() {
        let tiny = Backoff {
            initial: Duration::from_nanos(1),
            max: Duration::from_nanos(1),
            multiplier: 2,
        };
        assert_eq!(tiny.delay(1, 0), Duration::from_nanos(1));
        assert_eq!(tiny.delay(1, u64::MAX), Duration::from_nanos(1));
    }

    #[test]
    fn max_below_initial_is_read_as_initial_not_a_tight_loop() {
        let b = Backoff {
            initial: SECS(1),
            max: Duration::ZERO,
            multiplier: 2,
        };
        assert_eq!(b.ceiling(1), SECS(1));
        assert_eq!(b.ceiling(50), SECS(1));
        assert!(b.delay(50, 0) >= MS(500));
    }

    #[test]
    fn multiplier_zero_or_one_means_a_constant_delay() {
        for multiplier in [0, 1] {
            let b = Backoff {
                initial: SECS(2),
                max: SECS(30),
                multiplier,
            };
            assert_eq!(b.ceiling(1), SECS(2));
            assert_eq!(b.ceiling(9), SECS(2));
            assert_eq!(b.ceiling(u32::MAX), SECS(2));
        }
    }

    #[test]
    fn zero_initial_means_no_wait() {
        let b = Backoff {
            initial: Duration::ZERO,
            max: SECS(30),
            multiplier: 2,
        };
        assert_eq!(b.ceiling(u32::MAX), Duration::ZERO);
        assert_eq!(b.delay(5, 12345), Duration::ZERO);
    }

    // ---- Jitter --------------------------------------------------------------------------

    #[test]
    fn jitter_is_splitmix64() {
        // Reference outputs of splitmix64 (Vigna's C implementation) for seeds 0 and 1234567.
        let mut zero = Jitter::new(0);
        assert_eq!(zero.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(zero.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut other = Jitter::new(1_234_567);
        assert_eq!(other.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(other.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn jitter_is_deterministic_per_seed() {
        let mut a = Jitter::new(42);
        let mut b = Jitter::new(42);
        let xs: Vec<_> = (0..64).map(|_| a.next_u64()).collect();
        let ys: Vec<_> = (0..64).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        // A clone continues the same sequence.
        let mut c = a.clone();
        assert_eq!(a.next_u64(), c.next_u64());
    }

    #[test]
    fn jitter_with_different_seeds_differs() {
        let mut a = Jitter::new(1);
        let mut b = Jitter::new(2);
        let xs: Vec<_> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<_> = (0..16).map(|_| b.next_u64()).collect();
        assert!(xs.iter().zip(&ys).all(|(x, y)| x != y));
    }

    #[test]
    fn jitter_does_not_repeat_its_output() {
        let mut j = Jitter::new(9);
        let first = j.next_u64();
        assert!((0..1000).all(|_| j.next_u64() != first));
    }

    // ---- parse_retry_after ---------------------------------------------------------------

    fn parse(value: &str) -> Option<Duration> {
        parse_retry_after(value, wall(), DEFAULT_RETRY_AFTER_CAP)
    }

    #[test]
    fn retry_after_delta_seconds_is_that_many_seconds() {
        assert_eq!(parse("5"), Some(SECS(5)));
        assert_eq!(parse("60"), Some(SECS(60)));
        assert_eq!(parse("0007"), Some(SECS(7)));
    }

    #[test]
    fn retry_after_zero_seconds_is_valid_and_adds_nothing() {
        assert_eq!(parse("0"), Some(Duration::ZERO));
    }

    #[test]
    fn retry_after_optional_whitespace_is_tolerated() {
        assert_eq!(parse(" 5"), Some(SECS(5)));
        assert_eq!(parse("5 \t"), Some(SECS(5)));
        assert_eq!(parse("\t Mon, 01 Jan 2024 00:00:10 GMT  "), Some(SECS(10)));
    }

    #[test]
    fn retry_after_other_whitespace_is_malformed() {
        assert_eq!(parse("5\r\n"), None);
        assert_eq!(parse("\nMon, 01 Jan 2024 00:00:10 GMT"), None);
        assert_eq!(parse("Mon, 01 Jan 2024 00:00:10 GMT\r"), None);
        assert_eq!(parse("\u{a0}5"), None);
        assert_eq!(parse("5 5"), None);
    }

    #[test]
    fn retry_after_imf_fixdate_is_relative_to_now_wall() {
        assert_eq!(parse("Mon, 01 Jan 2024 00:00:30 GMT"), Some(SECS(30)));
        // Sub-second wall clocks count: 30 s ahead of 00:00:00.25 is 29.75 s.
        let now = wall() + MS(250);
        assert_eq!(
            parse_retry_after(
                "Mon, 01 Jan 2024 00:00:30 GMT",
                now,
                DEFAULT_RETRY_AFTER_CAP
            ),
            Some(MS(29_750))
        );
    }

    #[test]
    fn retry_after_rfc850_date_is_accepted() {
        let now = UNIX_EPOCH + SECS(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            parse_retry_after(
                "Sunday, 06-Nov-94 08:49:47 GMT",
                now,
                DEFAULT_RETRY_AFTER_CAP
            ),
            Some(SECS(10))
        );
    }

    #[test]
    fn retry_after_asctime_date_is_accepted() {
        let now = UNIX_EPOCH + SECS(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            parse_retry_after("Sun Nov  6 08:50:07 1994", now, DEFAULT_RETRY_AFTER_CAP),
            Some(SECS(30))
        );
    }

    #[test]
    fn retry_after_malformed_values_are_ignored() {
        for bad in [
            "abc",
            "1.5",
            "",
            "   ",
            "5s",
            "+5",
            "1e3",
            "0x10",
            "5,6",
            "５",
            "Mon, 01 Jan 2024 00:00:30",      // no zone
            "Mon, 01 Jan 2024 00:00:30 UTC",  // wrong zone name
            "Tue, 01 Jan 2024 00:00:30 GMT",  // wrong weekday
            "Mon, 32 Jan 2024 00:00:30 GMT",  // no such day
            "2024-01-01T00:00:30Z",           // RFC 3339 is not an HTTP-date
            "Mon,  01 Jan 2024 00:00:30 GMT", // extra space
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_negative_values_are_ignored() {
        assert_eq!(parse("-1"), None);
        assert_eq!(parse("-5"), None);
        assert_eq!(parse("-0"), None);
    }

    #[test]
    fn retry_after_expired_dates_are_ignored() {
        assert_eq!(parse("Sun, 31 Dec 2023 23:59:59 GMT"), None);
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), None);
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), None);
    }

    #[test]
    fn retry_after_date_exactly_now_is_expired() {
        assert_eq!(parse("Mon, 01 Jan 2024 00:00:00 GMT"), None);
        assert_eq!(parse("Mon, 01 Jan 2024 00:00:01 GMT"), Some(SECS(1)));
    }

    #[test]
    fn retry_after_excessive_values_are_capped() {
        assert_eq!(parse("61"), Some(DEFAULT_RETRY_AFTER_CAP));
        assert_eq!(parse("86400"), Some(DEFAULT_RETRY_AFTER_CAP));
        assert_eq!(
            parse("Tue, 02 Jan 2024 00:00:00 GMT"),
            Some(DEFAULT_RETRY_AFTER_CAP)
        );
        assert_eq!(
            parse("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(DEFAULT_RETRY_AFTER_CAP)
        );
    }

    #[test]
    fn retry_after_cap_is_configurable() {
        let cap = SECS(10);
        assert_eq!(parse_retry_after("9", wall(), cap), Some(SECS(9)));
        assert_eq!(parse_retry_after("11", wall(), cap), Some(cap));
        assert_eq!(
            parse_retry_after("Mon, 01 Jan 2024 00:01:00 GMT", wall(), cap),
            Some(cap)
        );
        assert_eq!(parse_retry_after("120", wall(), SECS(300)), Some(SECS(120)));
    }

    #[test]
    fn retry_after_absurdly_long_digit_strings_are_capped_not_ignored() {
        let huge = "9".repeat(400);
        assert_eq!(parse(&huge), Some(DEFAULT_RETRY_AFTER_CAP));
        assert_eq!(parse("18446744073709551616"), Some(DEFAULT_RETRY_AFTER_CAP)); // u64::MAX + 1
        assert_eq!(
            parse_retry_after(&huge, wall(), Duration::MAX),
            Some(Duration::MAX)
        );
    }

    #[test]
    fn retry_after_from_headers_reads_the_single_field() {
        let mut headers = Headers::new();
        assert_eq!(
            retry_after_from_headers(&headers, wall(), DEFAULT_RETRY_AFTER_CAP),
            None
        );
        headers.append("Retry-After", "7").unwrap();
        assert_eq!(
            retry_after_from_headers(&headers, wall(), DEFAULT_RETRY_AFTER_CAP),
            Some(SECS(7))
        );
    }

    #[test]
    fn retry_after_repeated_field_is_ignored() {
        let mut headers = Headers::new();
        headers.append("retry-after", "7").unwrap();
        headers.append("Retry-After", "7").unwrap();
        assert_eq!(
            retry_after_from_headers(&headers, wall(), DEFAULT_RETRY_AFTER_CAP),
            None
        );
    }

    // ---- combining -----------------------------------------------------------------------

    #[test]
    fn retry_after_is_a_minimum_added_to_the_jittered_backoff() {
        let b = Backoff::default();
        let ra = SECS(5);
        for random in [0, 1, 125_000_000, u64::MAX] {
            let wait = retry_delay(&b, 1, random, Some(ra));
            assert!(wait >= ra);
            assert_eq!(wait, ra + b.delay(1, random));
        }
        // A Retry-After far below the backoff still adds to it rather than vanishing.
        assert_eq!(retry_delay(&b, 8, 0, Some(SECS(1))), SECS(16));
    }

    #[test]
    fn retry_after_keeps_the_jitter_so_a_herd_spreads_out() {
        let b = Backoff::default();
        let waits: std::collections::BTreeSet<_> = (0..100u64)
            .map(|seed| retry_delay(&b, 1, Jitter::new(seed).next_u64(), Some(SECS(5))))
            .collect();
        assert!(waits.len() > 90);
    }

    #[test]
    fn retry_delay_without_retry_after_is_the_jittered_backoff() {
        let b = Backoff::default();
        assert_eq!(retry_delay(&b, 4, 99, None), b.delay(4, 99));
    }

    #[test]
    fn retry_delay_saturates() {
        let b = Backoff {
            initial: Duration::MAX,
            max: Duration::MAX,
            multiplier: 2,
        };
        assert_eq!(
            retry_delay(&b, 3, u64::MAX, Some(Duration::MAX)),
            Duration::MAX
        );
    }

    // ---- properties ----------------------------------------------------------------------

    fn any_backoff() -> impl Strategy<Value = Backoff> {
        (any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(i, m, multiplier)| Backoff {
            initial: Duration::from_nanos(i),
            max: Duration::from_nanos(m),
            multiplier,
        })
    }

    proptest! {
        #[test]
        fn prop_delay_is_within_half_to_full_ceiling(
            b in any_backoff(), attempt in any::<u32>(), random in any::<u64>()
        ) {
            let d = b.ceiling(attempt);
            let delay = b.delay(attempt, random);
            prop_assert!(delay <= d);
            prop_assert!(delay >= d / 2);
            prop_assert!(d <= b.max.max(b.initial));
            if !b.initial.is_zero() {
                prop_assert!(!delay.is_zero());
            }
        }

        #[test]
        fn prop_default_delay_is_within_half_to_full_ceiling(
            attempt in any::<u32>(), random in any::<u64>()
        ) {
            let b = Backoff::default();
            let d = b.ceiling(attempt);
            let delay = b.delay(attempt, random);
            prop_assert!(delay >= d / 2 && delay <= d && d <= SECS(30) && d >= MS(250));
        }

        #[test]
        fn prop_ceiling_never_decreases_with_attempt(b in any_backoff(), attempt in any::<u32>()) {
            let next = attempt.saturating_add(1);
            prop_assert!(b.ceiling(attempt) <= b.ceiling(next));
        }

        #[test]
        fn prop_ceiling_matches_the_formula(
            initial_ms in 1u64..10_000, max_ms in 0u64..1_000_000, multiplier in 0u32..10,
            attempt in 0u32..200
        ) {
            let b = Backoff { initial: MS(initial_ms), max: MS(max_ms), multiplier };
            let cap = u128::from(max_ms.max(initial_ms));
            let mut expected = u128::from(initial_ms);
            for _ in 1..attempt {
                expected = (expected * u128::from(multiplier.max(1))).min(cap);
            }
            prop_assert_eq!(b.ceiling(attempt).as_millis(), expected.min(cap));
        }

        #[test]
        fn prop_parse_retry_after_never_exceeds_cap(
            value in any::<String>(), secs in any::<u64>(), cap_ms in any::<u64>()
        ) {
            let now = UNIX_EPOCH.checked_add(SECS(secs)).unwrap_or(UNIX_EPOCH);
            let cap = MS(cap_ms);
            if let Some(d) = parse_retry_after(&value, now, cap) {
                prop_assert!(d <= cap);
            }
        }

        #[test]
        fn prop_parse_retry_after_digits_round_trip(
            n in any::<u64>(), cap_secs in any::<u64>(), pad in "[ \t]{0,3}"
        ) {
            let cap = SECS(cap_secs);
            let value = format!("{pad}{n}{pad}");
            prop_assert_eq!(parse_retry_after(&value, wall(), cap), Some(SECS(n).min(cap)));
        }

        #[test]
        fn prop_parse_retry_after_dates_round_trip(ahead in 1u64..100_000, cap_secs in 0u64..200_000) {
            let date = httpdate::fmt_http_date(wall() + SECS(ahead));
            let cap = SECS(cap_secs);
            prop_assert_eq!(parse_retry_after(&date, wall(), cap), Some(SECS(ahead).min(cap)));
            // The same date, seen from after it, has expired.
            prop_assert_eq!(parse_retry_after(&date, wall() + SECS(ahead), cap), None);
        }

        #[test]
        fn prop_retry_delay_is_at_least_retry_after(
            b in any_backoff(), attempt in any::<u32>(), random in any::<u64>(), ra in any::<u64>()
        ) {
            let ra = Duration::from_nanos(ra);
            let wait = retry_delay(&b, attempt, random, Some(ra));
            prop_assert!(wait >= ra);
            prop_assert!(wait >= b.delay(attempt, random));
        }
    }
}

//! `response_timeout`: arbitrary bytes read as the member's text and as its raw JSON value.
//! Nothing may panic, and a value is valid exactly when it matches `1*DIGIT TimeoutUnit` and
//! fits in `i64::MAX` nanoseconds, with the duration the digits and unit say.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::tunnel::response_timeout::{self, ResponseTimeout};
use serde_json::value::RawValue;

/// An independent, regex-free reading of the grammar: `Some(nanos)` when `s` matches and fits.
fn grammar_nanos(s: &str) -> Option<u128> {
    let split = s.bytes().position(|b| !b.is_ascii_digit())?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let per: u128 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    };
    let significant = digits.trim_start_matches('0');
    if significant.len() > 25 {
        return None;
    }
    let n: u128 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    let nanos = n.checked_mul(per)?;
    (nanos <= i64::MAX as u128).then_some(nanos)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    // As the decoded string value.
    let parsed = response_timeout::parse(text);
    match (&parsed, grammar_nanos(text)) {
        (Ok(d), Some(nanos)) => {
            assert_eq!(d.as_nanos(), nanos, "{text:?}");
            assert!(*d <= response_timeout::MAX);
        }
        (Err(_), None) => {}
        (got, want) => panic!("{text:?}: parse gave {got:?}, grammar says {want:?}"),
    }

    // As the member's raw JSON value.
    let Ok(raw) = serde_json::from_str::<Box<RawValue>>(text) else {
        return;
    };
    let read = ResponseTimeout::from_json(Some(&raw));
    let value: Result<serde_json::Value, _> = serde_json::from_str(raw.get());
    match value {
        Ok(serde_json::Value::Null) => assert_eq!(read, ResponseTimeout::Absent),
        Ok(serde_json::Value::String(s)) => match grammar_nanos(&s) {
            Some(nanos) => {
                assert_eq!(
                    read.duration().map(|d| d.as_nanos()),
                    Some(nanos),
                    "{text:?}"
                )
            }
            None => assert!(
                matches!(read, ResponseTimeout::Invalid(_)),
                "{text:?}: {read:?}"
            ),
        },
        // Any other JSON type, or a string that does not decode: never a deadline.
        _ => assert!(
            matches!(read, ResponseTimeout::Invalid(_)),
            "{text:?}: {read:?}"
        ),
    }
});

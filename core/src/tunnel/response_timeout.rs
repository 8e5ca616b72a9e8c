//! `response_timeout`: the optional relative lifetime of a polled command.
//!
//! Wire grammar (`protocol.md`, "Response timeout"):
//!
//! ```abnf
//! ResponseTimeout = 1*DIGIT TimeoutUnit
//! TimeoutUnit     = "ns" / "us" / "ms" / "s" / "m" / "h"
//! ```
//!
//! One non-negative integer, one lowercase unit, nothing else: no sign, fraction, exponent,
//! compound value or whitespace, and only as a JSON string. A value whose total exceeds the Go
//! reference client's duration range (`i64::MAX` nanoseconds, about 292 years) overflows and is
//! invalid. Absent, `null` and invalid values all mean "no deadline" (fail open: the command
//! stays decodable); a valid zero means the command is already expired.

use std::time::Duration;

use serde_json::value::RawValue;

/// The largest duration the grammar accepts: `i64::MAX` nanoseconds (Go's `time.Duration`).
pub const MAX: Duration = Duration::from_nanos(i64::MAX as u64);

/// What a command's `response_timeout` member says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseTimeout {
    /// The member is absent or `null`: legacy behaviour, no deadline.
    Absent,
    /// The member is present but invalid: fail open, no deadline.
    Invalid(ResponseTimeoutError),
    /// A valid duration; the deadline is the poll-response receipt instant plus this.
    Valid(Duration),
}

impl ResponseTimeout {
    /// The valid duration, if any.
    pub fn duration(&self) -> Option<Duration> {
        match self {
            ResponseTimeout::Valid(d) => Some(*d),
            _ => None,
        }
    }

    /// Reads the raw JSON of the member (`None` when absent).
    pub fn from_json(raw: Option<&RawValue>) -> Self {
        let Some(raw) = raw else {
            return ResponseTimeout::Absent;
        };
        let text = raw.get();
        if text == "null" {
            return ResponseTimeout::Absent;
        }
        if !text.starts_with('"') {
            return ResponseTimeout::Invalid(ResponseTimeoutError::NotAString);
        }
        match serde_json::from_str::<String>(text) {
            Ok(s) => match parse(&s) {
                Ok(d) => ResponseTimeout::Valid(d),
                Err(e) => ResponseTimeout::Invalid(e),
            },
            Err(_) => ResponseTimeout::Invalid(ResponseTimeoutError::NotAString),
        }
    }
}

/// Why a `response_timeout` value is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseTimeoutError {
    /// The JSON value is not a string (a number such as `30`, a boolean, an object...).
    #[error("response_timeout must be a JSON string")]
    NotAString,
    /// No leading digits.
    #[error("response_timeout must start with one or more ASCII digits")]
    NoDigits,
    /// The unit is missing or is not one of `ns`, `us`, `ms`, `s`, `m`, `h`.
    #[error("response_timeout unit must be one of ns, us, ms, s, m, h")]
    BadUnit,
    /// The value exceeds the representable range.
    #[error("response_timeout overflows the duration range")]
    Overflow,
}

/// Parses the text of a `response_timeout` string exactly by the wire grammar.
pub fn parse(s: &str) -> Result<Duration, ResponseTimeoutError> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(ResponseTimeoutError::NoDigits);
    }
    let (number, unit) = s.split_at(digits);
    let nanos_per_unit: u128 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return Err(ResponseTimeoutError::BadUnit),
    };
    // Leading zeros are digits like any other; accumulate with overflow checks.
    let mut n: u128 = 0;
    for b in number.bytes() {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(b - b'0')))
            .ok_or(ResponseTimeoutError::Overflow)?;
        if n > MAX.as_nanos() {
            return Err(ResponseTimeoutError::Overflow);
        }
    }
    let total = n
        .checked_mul(nanos_per_unit)
        .ok_or(ResponseTimeoutError::Overflow)?;
    let total = u64::try_from(total).map_err(|_| ResponseTimeoutError::Overflow)?;
    if total > MAX.as_nanos() as u64 {
        return Err(ResponseTimeoutError::Overflow);
    }
    Ok(Duration::from_nanos(total))
}

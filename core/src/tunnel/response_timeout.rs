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
            // The raw value is well-formed JSON, so a string that fails to decode holds an
            // escape that is not Unicode (a lone surrogate such as `"\ud800"`).
            Err(_) => ResponseTimeout::Invalid(ResponseTimeoutError::NotUnicode),
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
    /// The JSON string does not decode to Unicode text (it holds a lone surrogate escape).
    #[error("response_timeout is a JSON string that is not valid Unicode")]
    NotUnicode,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    fn from_json(json: &str) -> ResponseTimeout {
        ResponseTimeout::from_json(Some(&raw(json)))
    }

    const NANOS_PER: [(&str, u64); 6] = [
        ("ns", 1),
        ("us", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];

    /// A regex-free reading of `1*DIGIT TimeoutUnit` that also bounds the value to
    /// `i64::MAX` nanoseconds; `Some(nanos)` when it matches and fits.
    fn reference(s: &str) -> Option<u128> {
        let unit_start = s.find(|c: char| !c.is_ascii_digit())?;
        let (digits, unit) = s.split_at(unit_start);
        if digits.is_empty() {
            return None;
        }
        let per = NANOS_PER.iter().find(|(u, _)| *u == unit)?.1;
        let significant = digits.trim_start_matches('0');
        if significant.len() > 30 {
            return None;
        }
        let n: u128 = if significant.is_empty() {
            0
        } else {
            significant.parse().unwrap()
        };
        (n <= i64::MAX as u128 / u128::from(per)).then(|| n * u128::from(per))
    }

    #[test]
    fn every_unit_is_accepted_with_its_scale() {
        assert_eq!(parse("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse("7us"), Ok(Duration::from_micros(7)));
        assert_eq!(parse("7ms"), Ok(Duration::from_millis(7)));
        assert_eq!(parse("7s"), Ok(Duration::from_secs(7)));
        assert_eq!(parse("7m"), Ok(Duration::from_secs(7 * 60)));
        assert_eq!(parse("7h"), Ok(Duration::from_secs(7 * 3600)));
    }

    #[test]
    fn spec_examples_30s_and_4500ms_are_valid() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("4500ms"), Ok(Duration::from_millis(4500)));
    }

    #[test]
    fn zero_is_a_valid_immediate_expiry() {
        assert_eq!(from_json(r#""0s""#), ResponseTimeout::Valid(Duration::ZERO));
        for unit in ["ns", "us", "ms", "s", "m", "h"] {
            assert_eq!(parse(&format!("0{unit}")), Ok(Duration::ZERO));
        }
    }

    #[test]
    fn leading_zeros_are_digits_like_any_other() {
        assert_eq!(parse("007s"), Ok(Duration::from_secs(7)));
        assert_eq!(parse("000ms"), Ok(Duration::ZERO));
        let many = format!("{}1h", "0".repeat(100));
        assert_eq!(parse(&many), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn fractions_are_invalid() {
        assert_eq!(parse("4.5s"), Err(ResponseTimeoutError::BadUnit));
        assert_eq!(parse(".5s"), Err(ResponseTimeoutError::NoDigits));
        assert_eq!(parse("1.s"), Err(ResponseTimeoutError::BadUnit));
    }

    #[test]
    fn signed_values_are_invalid() {
        assert_eq!(parse("-1s"), Err(ResponseTimeoutError::NoDigits));
        assert_eq!(parse("+1s"), Err(ResponseTimeoutError::NoDigits));
        assert_eq!(parse("-0s"), Err(ResponseTimeoutError::NoDigits));
    }

    #[test]
    fn compound_values_are_invalid() {
        assert_eq!(parse("1m30s"), Err(ResponseTimeoutError::BadUnit));
        assert_eq!(parse("1h1m"), Err(ResponseTimeoutError::BadUnit));
        assert_eq!(parse("1s1"), Err(ResponseTimeoutError::BadUnit));
    }

    #[test]
    fn whitespace_anywhere_is_invalid() {
        for s in [" 1s", "1s ", "1 s", "\t1s", "1s\n", "\u{a0}1s"] {
            assert!(parse(s).is_err(), "{s:?}");
        }
        assert_eq!(
            from_json(r#"" 1s""#),
            ResponseTimeout::Invalid(ResponseTimeoutError::NoDigits)
        );
        assert_eq!(
            from_json(r#""1s ""#),
            ResponseTimeout::Invalid(ResponseTimeoutError::BadUnit)
        );
    }

    #[test]
    fn exponents_are_invalid() {
        assert_eq!(parse("1e3s"), Err(ResponseTimeoutError::BadUnit));
        assert_eq!(parse("1E3ms"), Err(ResponseTimeoutError::BadUnit));
    }

    #[test]
    fn unknown_units_are_invalid() {
        for s in [
            "30d", "30sec", "30", "30µs", "30μs", "30mss", "30hs", "30n", "30u",
        ] {
            assert_eq!(parse(s), Err(ResponseTimeoutError::BadUnit), "{s:?}");
        }
    }

    #[test]
    fn uppercase_units_are_invalid() {
        for s in ["30S", "30Ms", "30MS", "30H", "30NS", "30uS"] {
            assert_eq!(parse(s), Err(ResponseTimeoutError::BadUnit), "{s:?}");
        }
    }

    #[test]
    fn empty_and_unit_only_values_are_invalid() {
        assert_eq!(parse(""), Err(ResponseTimeoutError::NoDigits));
        assert_eq!(parse("s"), Err(ResponseTimeoutError::NoDigits));
        assert_eq!(parse("ms"), Err(ResponseTimeoutError::NoDigits));
    }

    #[test]
    fn non_ascii_digits_are_invalid() {
        // Arabic-Indic three and fullwidth one are Unicode digits, not ABNF DIGITs.
        assert_eq!(parse("\u{663}s"), Err(ResponseTimeoutError::NoDigits));
        assert_eq!(parse("1\u{ff11}s"), Err(ResponseTimeoutError::BadUnit));
    }

    #[test]
    fn largest_nanosecond_value_is_exactly_i64_max() {
        assert_eq!(
            parse("9223372036854775807ns"),
            Ok(Duration::from_nanos(9_223_372_036_854_775_807))
        );
        assert_eq!(parse("9223372036854775807ns").unwrap(), MAX);
        assert_eq!(
            parse("9223372036854775808ns"),
            Err(ResponseTimeoutError::Overflow)
        );
    }

    #[test]
    fn largest_hour_value_is_2562047h() {
        // 2562047 h = 9_223_369_200_000_000_000 ns <= i64::MAX < 2562048 h = 9_223_372_800_000_000_000 ns.
        assert_eq!(parse("2562047h"), Ok(Duration::from_secs(2_562_047 * 3600)));
        assert_eq!(parse("2562048h"), Err(ResponseTimeoutError::Overflow));
    }

    #[test]
    fn boundaries_of_every_unit_are_exact() {
        for (unit, per) in NANOS_PER {
            let max = i64::MAX as u64 / per;
            assert_eq!(
                parse(&format!("{max}{unit}")),
                Ok(Duration::from_nanos(max * per)),
                "{unit}"
            );
            assert_eq!(
                parse(&format!("{}{unit}", max + 1)),
                Err(ResponseTimeoutError::Overflow),
                "{unit}"
            );
        }
    }

    #[test]
    fn huge_values_overflow() {
        assert_eq!(
            parse("999999999999999999999999h"),
            Err(ResponseTimeoutError::Overflow)
        );
        let long = format!("{}ns", "9".repeat(10_000));
        assert_eq!(parse(&long), Err(ResponseTimeoutError::Overflow));
    }

    #[test]
    fn json_number_is_invalid_not_a_string() {
        assert_eq!(
            from_json("30"),
            ResponseTimeout::Invalid(ResponseTimeoutError::NotAString)
        );
        assert_eq!(
            from_json("0"),
            ResponseTimeout::Invalid(ResponseTimeoutError::NotAString)
        );
    }

    #[test]
    fn other_json_types_are_invalid_not_a_string() {
        for json in ["true", "false", "{}", r#"{"s":"30s"}"#, r#"["30s"]"#, "1.5"] {
            assert_eq!(
                from_json(json),
                ResponseTimeout::Invalid(ResponseTimeoutError::NotAString),
                "{json}"
            );
        }
    }

    #[test]
    fn null_and_absent_mean_no_deadline() {
        assert_eq!(ResponseTimeout::from_json(None), ResponseTimeout::Absent);
        assert_eq!(from_json("null"), ResponseTimeout::Absent);
        assert_eq!(ResponseTimeout::Absent.duration(), None);
    }

    #[test]
    fn invalid_values_fail_open_without_a_deadline() {
        for json in [
            "30",
            r#""4.5s""#,
            r#""30d""#,
            r#""999999999999999999999999h""#,
        ] {
            let t = from_json(json);
            assert!(matches!(t, ResponseTimeout::Invalid(_)), "{json}");
            assert_eq!(t.duration(), None, "{json}");
        }
    }

    #[test]
    fn json_string_escapes_are_decoded_before_the_grammar() {
        assert_eq!(
            from_json(r#""\u0033\u0030s""#),
            ResponseTimeout::Valid(Duration::from_secs(30))
        );
        // An escaped space is still whitespace inside the value.
        assert!(matches!(
            from_json(r#""1s\u0020""#),
            ResponseTimeout::Invalid(ResponseTimeoutError::BadUnit)
        ));
    }

    #[test]
    fn lone_surrogate_string_is_invalid_not_unicode() {
        // A lone surrogate escape is valid JSON syntax but not a Unicode string.
        assert_eq!(
            from_json(r#""\ud800s""#),
            ResponseTimeout::Invalid(ResponseTimeoutError::NotUnicode)
        );
    }

    #[test]
    fn member_read_from_a_command_object_ignores_surrounding_whitespace() {
        #[derive(serde::Deserialize)]
        struct Command<'a> {
            #[serde(borrow)]
            response_timeout: Option<&'a RawValue>,
        }
        let c: Command<'_> = serde_json::from_str(r#"{ "response_timeout" :  "30s"  }"#).unwrap();
        assert_eq!(
            ResponseTimeout::from_json(c.response_timeout),
            ResponseTimeout::Valid(Duration::from_secs(30))
        );
        let c: Command<'_> = serde_json::from_str(r#"{ "response_timeout" :  null  }"#).unwrap();
        // serde maps a JSON null to None for Option<&RawValue>: absent either way.
        assert_eq!(
            ResponseTimeout::from_json(c.response_timeout),
            ResponseTimeout::Absent
        );
    }

    fn unit_strategy() -> impl Strategy<Value = (&'static str, u64)> {
        proptest::sample::select(NANOS_PER.to_vec())
    }

    proptest! {
        #[test]
        fn every_in_range_value_of_the_grammar_is_valid(
            (unit, per, n) in unit_strategy()
                .prop_flat_map(|(u, p)| (Just(u), Just(p), 0..=i64::MAX as u64 / p)),
            zeros in 0usize..4,
        ) {
            let s = format!("{}{n}{unit}", "0".repeat(zeros));
            prop_assert_eq!(parse(&s), Ok(Duration::from_nanos(n * per)));
            let json = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(
                from_json(&json),
                ResponseTimeout::Valid(Duration::from_nanos(n * per))
            );
        }

        #[test]
        fn values_near_each_units_bound_are_valid_exactly_when_they_fit(
            (unit, per, offset) in unit_strategy()
                .prop_flat_map(|(u, p)| (Just(u), Just(p), -1000i64..=1000)),
        ) {
            let n = (i64::MAX as u64 / per).checked_add_signed(offset).unwrap();
            let s = format!("{n}{unit}");
            let fits = u128::from(n) * u128::from(per) <= i64::MAX as u128;
            prop_assert_eq!(parse(&s).is_ok(), fits, "{}", s);
        }

        #[test]
        fn parse_accepts_exactly_the_grammar_near_the_alphabet(
            s in "[0-9]{0,22}[-+. 0-9a-zA-Zµe]{0,4}",
        ) {
            let got = parse(&s).ok().map(|d| d.as_nanos());
            prop_assert_eq!(got, reference(&s), "{:?}", s);
        }

        #[test]
        fn parse_accepts_exactly_the_grammar_for_any_string(s in any::<String>()) {
            let got = parse(&s).ok().map(|d| d.as_nanos());
            prop_assert_eq!(got, reference(&s), "{:?}", s);
        }

        #[test]
        fn from_json_is_valid_exactly_for_grammar_strings(s in "[0-9]{0,21}[a-z ]{0,3}") {
            let json = serde_json::to_string(&s).unwrap();
            let expected = match reference(&s) {
                Some(nanos) => ResponseTimeout::Valid(Duration::from_nanos(nanos as u64)),
                None => ResponseTimeout::Invalid(parse(&s).unwrap_err()),
            };
            prop_assert_eq!(from_json(&json), expected);
            // The same text as a bare JSON number (when it is one) is never valid.
            if let Ok(n) = s.parse::<u64>() {
                prop_assert_eq!(
                    from_json(&n.to_string()),
                    ResponseTimeout::Invalid(ResponseTimeoutError::NotAString)
                );
            }
        }
    }
}

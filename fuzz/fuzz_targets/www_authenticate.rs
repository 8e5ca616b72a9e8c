//! Fuzzes the `WWW-Authenticate` challenge parser.
//!
//! Input layout: the bytes as text (invalid UTF-8 replaced by U+FFFD), split on `\n` into
//! header field values, one per `WWW-Authenticate` line.
//!
//! Checked on every run:
//! - the parser never panics; an error names a value that exists and an offset within it, and
//!   says something;
//! - accepted input is at most `MAX_CHALLENGE_BYTES`, and the values parsed one by one give the
//!   same challenges as all of them together;
//! - every challenge is well formed: a token scheme, a token68 or parameters but not both,
//!   token parameter names with no name twice (ignoring case), each found by `param`;
//! - the Bearer view is the first challenge whose scheme is `Bearer` in any case, agrees with
//!   `BearerChallenge::from_headers`, and its accessors hold (`scopes` are non-empty and
//!   space-free, at most one error predicate is true);
//! - a canonical rendering of the challenges (every value quoted and escaped) parses back to
//!   the same challenges.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpwire_core::auth::{
    bearer, parse_challenges, BearerChallenge, Challenge, MAX_CHALLENGE_BYTES,
};

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn check_challenge(c: &Challenge) {
    assert!(!c.scheme.is_empty() && c.scheme.bytes().all(is_tchar));
    assert!(c.is_scheme(&c.scheme.to_ascii_uppercase()));
    if let Some(t) = &c.token68 {
        assert!(c.params.is_empty(), "token68 and parameters");
        let body = t.trim_end_matches('=');
        assert!(!body.is_empty());
        assert!(body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)));
    }
    for (i, (name, value)) in c.params.iter().enumerate() {
        assert!(!name.is_empty() && name.bytes().all(is_tchar));
        assert!(
            c.params[..i]
                .iter()
                .all(|(other, _)| !other.eq_ignore_ascii_case(name)),
            "duplicate parameter {name:?}"
        );
        assert_eq!(c.param(&name.to_ascii_lowercase()), Some(value.as_str()));
        assert!(!value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f));
    }
}

fn check_bearer(challenges: &[Challenge], values: &[&str]) {
    let view = bearer(challenges);
    let first = challenges.iter().find(|c| c.is_scheme("bearer"));
    assert_eq!(view.is_some(), first.is_some());
    assert_eq!(
        BearerChallenge::from_headers(values.iter().copied()).ok(),
        Some(view.clone())
    );
    let (Some(view), Some(first)) = (view, first) else {
        return;
    };
    assert_eq!(view.scope.as_deref(), first.param("scope"));
    assert_eq!(
        view.resource_metadata.as_deref(),
        first.param("resource_metadata")
    );
    assert_eq!(view.error.as_deref(), first.param("error"));
    for scope in view.scopes() {
        assert!(!scope.is_empty() && !scope.contains(' '));
    }
    let predicates = [
        view.is_insufficient_scope(),
        view.is_invalid_token(),
        view.is_invalid_request(),
    ];
    assert!(predicates.iter().filter(|&&p| p).count() <= 1);
}

/// One value per challenge, every parameter value as an escaped quoted-string.
fn render(challenges: &[Challenge]) -> Vec<String> {
    challenges
        .iter()
        .map(|c| {
            let mut s = c.scheme.clone();
            if let Some(t) = &c.token68 {
                s.push(' ');
                s.push_str(t);
            }
            for (i, (name, value)) in c.params.iter().enumerate() {
                s.push_str(if i == 0 { " " } else { ", " });
                s.push_str(name);
                s.push_str("=\"");
                for ch in value.chars() {
                    if ch == '"' || ch == '\\' {
                        s.push('\\');
                    }
                    s.push(ch);
                }
                s.push('"');
            }
            s
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let values: Vec<&str> = text.split('\n').collect();
    match parse_challenges(values.iter().copied()) {
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if let Some((value, offset)) = e.position() {
                assert!(value < values.len());
                assert!(offset <= values[value].len());
            }
        }
        Ok(challenges) => {
            assert!(values.iter().map(|v| v.len()).sum::<usize>() <= MAX_CHALLENGE_BYTES);
            let one_by_one: Vec<Challenge> = values
                .iter()
                .flat_map(|v| match parse_challenges([*v]) {
                    Ok(c) => c,
                    Err(e) => panic!("{v:?} fails alone ({e}) but not with the others"),
                })
                .collect();
            assert_eq!(one_by_one, challenges);
            for c in &challenges {
                check_challenge(c);
            }
            check_bearer(&challenges, &values);
            let rendered = render(&challenges);
            if rendered.iter().map(String::len).sum::<usize>() <= MAX_CHALLENGE_BYTES {
                let again = parse_challenges(rendered.iter().map(String::as_str));
                assert_eq!(again.as_ref(), Ok(&challenges), "rendered as {rendered:?}");
            }
        }
    }
});

//! The response-header allowlist: which upstream MCP response headers a tunnel client copies
//! into `resp_headers` (`protocol.md`, "Structured MCP errors and synthesized tunnel failures").
//!
//! The rules, in order:
//!
//! 1. `Connection` is hop-by-hop: it is removed, and so is every header it nominates. Its value
//!    is a comma-separated list of header names, compared case-insensitively; every
//!    `Connection` header counts, and a nomination wins even over the allowlist
//!    (`Connection: Mcp-Session-Id` removes `Mcp-Session-Id`).
//! 2. Empty values (nothing but spaces and tabs) are dropped.
//! 3. Only the names in [`RESPONSE_HEADER_ALLOWLIST`] are kept, compared case-insensitively and
//!    written with the allowlist's canonical spelling.
//! 4. Repeated values stay separate and in their received order; nothing is folded into a
//!    comma-separated string.

use std::collections::BTreeMap;

use crate::http::Headers;

/// The protocol-relevant upstream response headers a tunnel client forwards, canonically spelled.
pub const RESPONSE_HEADER_ALLOWLIST: [&str; 6] = [
    "Content-Type",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
    "Access-Control-Expose-Headers",
    "WWW-Authenticate",
];

/// The canonical spelling of `name` when it is on the allowlist (compared case-insensitively).
pub fn allowlisted_name(name: &str) -> Option<&'static str> {
    RESPONSE_HEADER_ALLOWLIST
        .into_iter()
        .find(|allowed| allowed.eq_ignore_ascii_case(name))
}

/// HTTP's optional whitespace.
fn trim_ows(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Upstream MCP response headers → `resp_headers`, by the rules in the module docs.
pub fn filter_response_headers(upstream: &Headers) -> BTreeMap<String, Vec<String>> {
    let nominated: Vec<&str> = upstream
        .get_all("Connection")
        .flat_map(|v| v.split(','))
        .map(trim_ows)
        .filter(|token| !token.is_empty())
        .collect();
    let is_nominated = |name: &str| {
        name.eq_ignore_ascii_case("Connection")
            || nominated.iter().any(|n| n.eq_ignore_ascii_case(name))
    };
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in upstream.iter() {
        if is_nominated(name) || trim_ows(value).is_empty() {
            continue;
        }
        if let Some(canonical) = allowlisted_name(name) {
            out.entry(canonical.to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (n, v) in pairs {
            h.append(*n, *v).unwrap();
        }
        h
    }

    fn map(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, vs)| {
                (
                    (*k).to_owned(),
                    vs.iter().map(|v| (*v).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn only_allowlisted_headers_are_kept() {
        let h = headers(&[
            ("Content-Type", "application/json"),
            ("Set-Cookie", "a=1"),
            ("Server", "x"),
            ("Mcp-Session-Id", "s1"),
            ("Mcp-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", "42"),
            ("Access-Control-Expose-Headers", "Mcp-Session-Id"),
            ("WWW-Authenticate", "Bearer realm=\"x\""),
            ("Transfer-Encoding", "chunked"),
            ("Authorization", "Bearer secret"),
        ]);
        let out = filter_response_headers(&h);
        assert_eq!(out.keys().map(String::as_str).collect::<Vec<_>>(), {
            let mut v = RESPONSE_HEADER_ALLOWLIST.to_vec();
            v.sort();
            v
        });
        assert!(!out.contains_key("Set-Cookie"));
        assert!(!out.contains_key("Authorization"));
    }

    #[test]
    fn allowlist_match_is_case_insensitive_and_output_uses_the_canonical_spelling() {
        let h = headers(&[
            ("content-type", "text/event-stream"),
            ("MCP-SESSION-ID", "s1"),
            ("last-event-id", "7"),
            ("www-authenticate", "Bearer"),
        ]);
        assert_eq!(
            filter_response_headers(&h),
            map(&[
                ("Content-Type", &["text/event-stream"]),
                ("Last-Event-ID", &["7"]),
                ("Mcp-Session-Id", &["s1"]),
                ("WWW-Authenticate", &["Bearer"]),
            ])
        );
    }

    #[test]
    fn connection_header_itself_is_removed() {
        let h = headers(&[("Connection", "keep-alive"), ("Content-Type", "a/b")]);
        let out = filter_response_headers(&h);
        assert_eq!(out, map(&[("Content-Type", &["a/b"])]));
    }

    #[test]
    fn connection_nominated_allowlisted_header_is_removed() {
        let h = headers(&[
            ("Connection", "Mcp-Session-Id"),
            ("Mcp-Session-Id", "s1"),
            ("Content-Type", "application/json"),
        ]);
        assert_eq!(
            filter_response_headers(&h),
            map(&[("Content-Type", &["application/json"])])
        );
    }

    #[test]
    fn connection_tokens_are_comma_separated_trimmed_and_case_insensitive() {
        let h = headers(&[
            ("Connection", " close ,\tmcp-session-id, ,WWW-AUTHENTICATE "),
            ("Mcp-Session-Id", "s1"),
            ("WWW-Authenticate", "Bearer"),
            ("Content-Type", "application/json"),
            ("Last-Event-ID", "1"),
        ]);
        assert_eq!(
            filter_response_headers(&h),
            map(&[
                ("Content-Type", &["application/json"]),
                ("Last-Event-ID", &["1"]),
            ])
        );
    }

    #[test]
    fn every_connection_header_nominates() {
        let h = headers(&[
            ("Connection", "keep-alive"),
            ("Content-Type", "application/json"),
            ("connection", "Last-Event-ID"),
            ("Last-Event-ID", "9"),
            ("CONNECTION", "content-type"),
        ]);
        assert!(filter_response_headers(&h).is_empty());
    }

    #[test]
    fn nomination_applies_to_values_received_before_the_connection_header() {
        let h = headers(&[
            ("Mcp-Protocol-Version", "2025-11-25"),
            ("Connection", "Mcp-Protocol-Version"),
        ]);
        assert!(filter_response_headers(&h).is_empty());
    }

    #[test]
    fn empty_values_are_dropped() {
        let h = headers(&[
            ("Mcp-Session-Id", ""),
            ("Content-Type", " \t "),
            ("Content-Type", "application/json"),
            ("WWW-Authenticate", ""),
        ]);
        assert_eq!(
            filter_response_headers(&h),
            map(&[("Content-Type", &["application/json"])]),
            "a name whose values are all empty is absent, not an empty list"
        );
    }

    #[test]
    fn repeated_values_are_kept_in_order_and_never_folded() {
        let h = headers(&[
            ("WWW-Authenticate", "Bearer realm=\"a\""),
            ("Content-Type", "application/json"),
            ("www-authenticate", "DPoP algs=\"ES256\""),
            ("WWW-AUTHENTICATE", "Basic, Digest"),
        ]);
        assert_eq!(
            filter_response_headers(&h),
            map(&[
                ("Content-Type", &["application/json"]),
                (
                    "WWW-Authenticate",
                    &["Bearer realm=\"a\"", "DPoP algs=\"ES256\"", "Basic, Digest"]
                ),
            ])
        );
    }

    #[test]
    fn no_headers_give_an_empty_map() {
        assert!(filter_response_headers(&Headers::new()).is_empty());
    }

    fn any_name() -> impl Strategy<Value = String> {
        prop_oneof![
            (0..RESPONSE_HEADER_ALLOWLIST.len())
                .prop_map(|i| RESPONSE_HEADER_ALLOWLIST[i].to_owned()),
            (0..RESPONSE_HEADER_ALLOWLIST.len())
                .prop_map(|i| RESPONSE_HEADER_ALLOWLIST[i].to_ascii_lowercase()),
            Just("Connection".to_owned()),
            "[A-Za-z][A-Za-z0-9-]{0,12}",
        ]
    }

    proptest! {
        #[test]
        fn output_is_allowlisted_nonempty_unnominated_and_order_preserving(
            pairs in proptest::collection::vec((any_name(), "[ -~]{0,8}"), 0..12)
        ) {
            let mut h = Headers::new();
            for (n, v) in &pairs {
                h.append(n.clone(), v.clone()).unwrap();
            }
            let out = filter_response_headers(&h);
            let nominated: Vec<String> = h
                .get_all("Connection")
                .flat_map(|v| v.split(','))
                .map(|t| t.trim_matches([' ', '\t']).to_ascii_lowercase())
                .collect();
            for (k, vs) in &out {
                prop_assert!(RESPONSE_HEADER_ALLOWLIST.contains(&k.as_str()));
                prop_assert!(!nominated.contains(&k.to_ascii_lowercase()));
                prop_assert!(!vs.is_empty());
                // Exactly the non-empty input values of that name, in input order.
                let expected: Vec<String> = pairs
                    .iter()
                    .filter(|(n, v)| n.eq_ignore_ascii_case(k) && !v.trim_matches([' ', '\t']).is_empty())
                    .map(|(_, v)| v.clone())
                    .collect();
                prop_assert_eq!(vs, &expected);
            }
        }
    }
}

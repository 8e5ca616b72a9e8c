//! Harpoon's target registry: label and URL validation with errors that name the entry, the
//! comparison form (scheme and host lowercased, the rest as written, the original spelling
//! kept), dot segments caught after unescaping, the target limit, and the `--harpoon.target` /
//! `HARPOON_TARGETS` forms (quoted values round-trip); and the request header filter (nothing
//! hop-by-hop, proxy, forwarding, cookie or injected survives; our `User-Agent` once).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcpwire_core::tunnel::harpoon::targets::{valid_label, MAX_TARGETS};
use mcpwire_core::tunnel::harpoon::{Registry, TargetError, TargetSource, TargetSpec};
use proptest::prelude::*;

fn spec(label: &str, url: &str) -> TargetSpec {
    TargetSpec {
        label: label.into(),
        url: url.into(),
        description: String::new(),
        source: TargetSource::Config,
        tags: Vec::new(),
    }
}

fn register(reg: &mut Registry, label: &str, url: &str) -> Result<(), TargetError> {
    reg.register(spec(label, url)).map(|_| ())
}

#[test]
fn a_valid_target_is_registered_and_found_by_label_and_by_url() {
    let mut reg = Registry::new(false);
    assert!(reg.is_empty());
    register(
        &mut reg,
        "idp-token",
        "https://IdP.Internal:8443/OAuth/Token?x=A",
    )
    .unwrap();
    let t = reg.get("idp-token").unwrap();
    assert_eq!(
        t.url(),
        "https://IdP.Internal:8443/OAuth/Token?x=A",
        "original spelling kept"
    );
    // Scheme and host compare lowercased; path and query as written.
    let found: Vec<_> = reg
        .find_url("HTTPS://idp.internal:8443/OAuth/Token?x=A")
        .map(|t| t.label().to_owned())
        .collect();
    assert_eq!(found, ["idp-token"]);
    assert_eq!(
        reg.find_url("https://idp.internal:8443/oauth/token?x=A")
            .count(),
        0
    );
    assert_eq!(
        reg.find_url("https://idp.internal:8443/OAuth/Token?x=a")
            .count(),
        0
    );
    assert_eq!(
        reg.find_url("https://idp.internal/OAuth/Token?x=A").count(),
        0,
        "port counts"
    );
    assert_eq!(reg.len(), 1);
}

#[test]
fn several_labels_may_share_a_url_and_are_found_in_registration_order() {
    let mut reg = Registry::new(false);
    register(&mut reg, "oauth-issuer-1", "https://as.example/").unwrap();
    register(&mut reg, "oauth-token-1", "https://as.example/token").unwrap();
    register(&mut reg, "oauth-jwks-1", "https://AS.example/").unwrap();
    let found: Vec<_> = reg
        .find_url("https://as.example/")
        .map(|t| t.label().to_owned())
        .collect();
    assert_eq!(found, ["oauth-issuer-1", "oauth-jwks-1"]);
}

#[test]
fn bad_labels_are_refused_with_the_entry_named() {
    let mut reg = Registry::new(false);
    for label in [
        "",
        "Upper",
        "-lead",
        "_lead",
        "has space",
        "dot.ted",
        &"a".repeat(65),
    ] {
        let e = register(&mut reg, label, "https://h.example/").unwrap_err();
        assert!(
            matches!(e, TargetError::BadLabel { .. }),
            "{label:?}: {e:?}"
        );
        assert!(e.to_string().contains("#1"), "{e}");
    }
    register(&mut reg, &"a".repeat(64), "https://h.example/").unwrap();
    register(&mut reg, "0-9_z", "https://h.example/").unwrap();
}

#[test]
fn a_duplicate_label_is_refused() {
    let mut reg = Registry::new(false);
    register(&mut reg, "a", "https://h.example/1").unwrap();
    let e = register(&mut reg, "a", "https://h.example/2").unwrap_err();
    assert_eq!(e, TargetError::DuplicateLabel { label: "a".into() });
    assert_eq!(reg.get("a").unwrap().url(), "https://h.example/1");
}

#[test]
fn urls_must_be_absolute_https_with_a_host() {
    let mut reg = Registry::new(false);
    for url in [
        "/relative",
        "h.example/x",
        "https:h.example/x",
        "https:///x",
        "https://",
        "https://h.example:99999/",
        "https://h .example/",
        "https://h.example/a b",
    ] {
        let e = register(&mut reg, "t", url).unwrap_err();
        assert_eq!(e, TargetError::NotAbsolute { label: "t".into() }, "{url}");
        if url.len() > "https://".len() {
            assert!(!e.to_string().contains(url), "the URL is not quoted: {e}");
        }
    }
    for url in [
        "http://h.example/",
        "ftp://h.example/",
        "file://h/etc/passwd",
    ] {
        let e = register(&mut reg, "t", url).unwrap_err();
        assert_eq!(e, TargetError::Scheme { label: "t".into() }, "{url}");
    }
    let mut plain = Registry::new(true);
    register(&mut plain, "t", "http://127.0.0.1:8080/x").unwrap();
    assert!(register(&mut plain, "u", "ftp://h.example/").is_err());
    register(&mut plain, "v", "https://[::1]:8443/").unwrap();
}

#[test]
fn dot_segments_are_refused_after_unescaping() {
    let mut reg = Registry::new(false);
    for url in [
        "https://h.example/a/../b",
        "https://h.example/./b",
        "https://h.example/a/..",
        "https://h.example/a/%2e%2e/b",
        "https://h.example/a/%2E./b",
        "https://h.example/a/.%2e",
        "https://h.example/a\\..\\b",
    ] {
        let e = register(&mut reg, "t", url).unwrap_err();
        assert_eq!(e, TargetError::DotSegment { label: "t".into() }, "{url}");
    }
    // Dots elsewhere are fine: in names, the query, the fragment.
    for (i, url) in [
        "https://h.example/a.b/..c/...",
        "https://h.example/x?p=../..",
        "https://h.example/x#..",
    ]
    .iter()
    .enumerate()
    {
        register(&mut reg, &format!("ok{i}"), url).unwrap();
    }
}

#[test]
fn at_most_ten_thousand_targets() {
    let mut reg = Registry::new(false);
    for i in 0..MAX_TARGETS {
        register(
            &mut reg,
            &format!("t{i}"),
            &format!("https://h.example/{i}"),
        )
        .unwrap();
    }
    let e = register(&mut reg, "one-more", "https://h.example/x").unwrap_err();
    assert_eq!(
        e,
        TargetError::TooMany {
            label: "one-more".into()
        }
    );
    assert_eq!(reg.len(), MAX_TARGETS);
}

#[test]
fn debug_output_never_shows_a_url() {
    let mut reg = Registry::new(false);
    register(&mut reg, "t", "https://user:secret@private.internal/x").unwrap();
    let shown = format!("{reg:?} {:?}", spec("t", "https://private.internal/y"));
    assert!(
        !shown.contains("private.internal") && !shown.contains("secret"),
        "{shown}"
    );
}

#[test]
fn the_flag_form_parses_with_quotes_and_says_what_is_wrong() {
    let s = TargetSpec::parse(
        r#"label=idp,url=https://idp.internal/token?a=1&b=2,desc="The IdP, \"token\" endpoint; x=y""#,
        "--harpoon.target #1",
    )
    .unwrap();
    assert_eq!(s.label, "idp");
    assert_eq!(s.url, "https://idp.internal/token?a=1&b=2");
    assert_eq!(s.description, r#"The IdP, "token" endpoint; x=y"#);
    let s = TargetSpec::parse(" label = a , url = https://a.internal/ ", "x").unwrap();
    assert_eq!(
        (s.label.as_str(), s.url.as_str()),
        ("a", "https://a.internal/")
    );
    for (bad, says) in [
        ("url=https://a/", "no label="),
        ("label=a", "has no url="),
        ("label=a,url=https://a/,colour=red", "unknown key 'colour'"),
        ("label=a,label=b,url=https://a/", "'label' is given twice"),
        ("label=a,url", "has no '='"),
        (r#"label=a,url=https://a/,desc="open"#, "no closing quote"),
        (
            r#"label="a"x,url=https://a/"#,
            "something other than a comma",
        ),
    ] {
        let e = TargetSpec::parse(bad, "--harpoon.target #3").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("--harpoon.target #3") && text.contains(says),
            "{bad}: {text}"
        );
    }
}

#[test]
fn the_env_form_splits_at_semicolons_and_newlines_outside_quotes() {
    let list = TargetSpec::parse_list(
        "label=a,url=https://a.internal/x; label=b,url=https://b.internal/y,desc=\"one; two\"\n\n label=c,url=https://c.internal/\r\n",
    )
    .unwrap();
    let labels: Vec<_> = list.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["a", "b", "c"]);
    assert_eq!(list[1].description, "one; two");
    let e = TargetSpec::parse_list("label=a,url=https://a/;label=b").unwrap_err();
    assert!(e.to_string().contains("HARPOON_TARGETS entry #2"), "{e}");
    assert!(TargetSpec::parse_list(" ;\n ").unwrap().is_empty());
}

proptest! {
    #[test]
    fn labels_are_exactly_the_pattern(label in "[a-z0-9][a-z0-9_-]{0,63}") {
        prop_assert!(valid_label(&label));
        let mut reg = Registry::new(false);
        prop_assert!(reg.register(spec(&label, "https://h.example/")).is_ok());
    }

    #[test]
    fn anything_else_is_not_a_label(label in "\\PC{0,70}") {
        let pattern = label.len() <= 64
            && label.bytes().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && label.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-');
        prop_assert_eq!(valid_label(&label), pattern);
    }

    #[test]
    fn a_dot_segment_anywhere_in_the_path_is_refused(
        before in proptest::collection::vec("[a-zA-Z0-9_~-]{1,8}", 0..4),
        dots in prop::sample::select(vec![".", "..", "%2e", "%2E", "%2e%2e", ".%2E", "%2E."]),
        after in proptest::collection::vec("[a-zA-Z0-9_~-]{1,8}", 0..4),
        query in "[a-z0-9=&./]{0,12}",
    ) {
        let mut path = before.join("/");
        if !path.is_empty() { path.push('/'); }
        path.push_str(dots);
        for a in &after { path.push('/'); path.push_str(a); }
        let url = format!("https://h.example/{path}?{query}");
        let mut reg = Registry::new(false);
        prop_assert_eq!(
            reg.register(spec("t", &url)).map(|_| ()),
            Err(TargetError::DotSegment { label: "t".into() })
        );
    }

    #[test]
    fn lookups_ignore_scheme_and_host_case_only(
        host in "[a-zA-Z][a-zA-Z0-9]{0,10}\\.[a-zA-Z]{2,5}",
        path in "(/[a-zA-Z0-9_.~-]{1,8}){0,4}",
        flip in any::<u64>(),
    ) {
        prop_assume!(!path.split('/').any(|s| s == "." || s == ".."));
        let url = format!("https://{host}{path}");
        let mut reg = Registry::new(false);
        reg.register(spec("t", &url)).unwrap();
        // The same URL with the scheme and host in any case is found.
        let recased: String = format!("HTTPS://{host}")
            .chars()
            .enumerate()
            .map(|(i, c)| if flip >> (i % 64) & 1 == 1 { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() })
            .collect();
        let candidate = format!("{recased}{path}");
        prop_assert_eq!(reg.find_url(&candidate).count(), 1);
        prop_assert_eq!(reg.get("t").unwrap().url(), url.as_str());
        // A path that differs in case is a different URL.
        if path.chars().any(|c| c.is_ascii_alphabetic()) {
            let other = format!("https://{host}{}", swap_case(&path));
            prop_assert_eq!(reg.find_url(&other).count(), 0);
        }
    }

    #[test]
    fn quoted_values_round_trip_through_the_flag_and_env_forms(
        label in "[a-z0-9][a-z0-9_-]{0,20}",
        path in "[a-zA-Z0-9/,=;\"\\\\]{0,20}",
        desc in "\\PC{0,40}",
    ) {
        let s = TargetSpec {
            label,
            url: format!("https://h.example/{path}"),
            description: desc.trim().to_owned(),
            source: TargetSource::Config,
            tags: Vec::new(),
        };
        let flag = s.to_flag();
        prop_assert_eq!(TargetSpec::parse(&flag, "x").unwrap(), s.clone());
        let list = TargetSpec::parse_list(&format!("{flag};{flag}\n{flag}")).unwrap();
        prop_assert_eq!(list, vec![s.clone(), s.clone(), s]);
    }

    #[test]
    fn parsing_never_panics(value in "\\PC{0,80}") {
        let _ = TargetSpec::parse(&value, "x");
        let _ = TargetSpec::parse_list(&value);
        let mut reg = Registry::new(true);
        let _ = reg.register(spec("t", &value));
        let _ = reg.find_url(&value).count();
    }
}

fn swap_case(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_uppercase() {
                c.to_ascii_lowercase()
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

mod headers {
    use mcpwire_core::tunnel::harpoon::headers::{filter_request_headers, DroppedClass};
    use proptest::prelude::*;

    const UA: &str = "mcpwire-harpoon/0.1";

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Connection-nominated names are matched however the value is spaced and cased.
    #[test]
    fn connection_tokens_are_trimmed_and_compared_without_case() {
        let f = filter_request_headers(
            &h(&[
                ("Connection", "  X-A ,,\tx-b,X-C  "),
                ("x-a", "1"),
                ("X-B", "2"),
                ("X-c", "3"),
                ("X-D", "4"),
            ]),
            UA,
        );
        let kept: Vec<&str> = f.kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(kept, ["X-D", "Accept-Encoding", "User-Agent"]);
    }

    #[test]
    fn each_class_is_dropped_and_counted_and_the_rest_kept_as_written() {
        let f = filter_request_headers(
            &h(&[
                ("Accept", "application/json"),
                ("connection", "close, X-Secret-Hop"),
                ("Keep-Alive", "timeout=5"),
                ("TRANSFER-ENCODING", "chunked"),
                ("Host", "evil.example"),
                ("Content-Length", "99"),
                ("Cookie", "session=abc"),
                ("Proxy-Authorization", "Basic Zm9v"),
                ("X-Forwarded-For", "10.0.0.1"),
                ("X-Forwarded-Host", "evil.example"),
                ("Forwarded", "for=10.0.0.1"),
                ("X-Real-IP", "10.0.0.1"),
                ("True-Client-IP", "10.0.0.1"),
                ("X-Secret-Hop", "1"),
                ("User-Agent", "curl/8"),
                ("Bad Name", "x"),
                ("X-Injected", "a\r\nHost: evil.example"),
                ("Authorization", "Bearer t"),
                ("X-Custom", "Kept As Written"),
                ("Trailer", "X-T"),
                ("Proxy-Connection", "keep-alive"),
                ("Proxy", "http://evil.example"),
                ("X-Original-URL", "/admin"),
                ("X-HTTP-Method-Override", "DELETE"),
                ("X-Original-Host", "evil.example"),
                ("Accept-Encoding", "gzip"),
                ("Range", "bytes=0-10"),
                ("If-Range", "\"etag\""),
            ]),
            UA,
        );
        assert_eq!(
            f.kept,
            h(&[
                ("Accept", "application/json"),
                ("Authorization", "Bearer t"),
                ("X-Custom", "Kept As Written"),
                ("Accept-Encoding", "identity"),
                ("User-Agent", UA),
            ])
        );
        use DroppedClass::*;
        assert_eq!(
            f.dropped,
            [
                HopByHop,
                HopByHop,
                HopByHop,
                Host,
                ContentLength,
                Cookie,
                Proxy,
                Forwarding,
                Forwarding,
                Forwarding,
                Forwarding,
                Forwarding,
                ConnectionNominated,
                UserAgent,
                Invalid,
                Invalid,
                HopByHop,
                HopByHop,
                Proxy,
                Override,
                Override,
                Forwarding,
                Encoding,
                Range,
                Range,
            ]
        );
        // What is logged is the class, never a value.
        let log = format!("{:?}", f.dropped);
        assert!(!log.contains("abc") && !log.contains("10.0.0.1"), "{log}");
    }

    proptest! {
        #[test]
        fn nothing_forbidden_survives_and_user_agent_is_ours_once(
            headers in proptest::collection::vec(
                (
                    prop::sample::select(vec![
                        "Host", "host", "Cookie", "Proxy-Foo", "X-Forwarded-Proto", "x-real-ip",
                        "Via", "TE", "Upgrade", "User-Agent", "X-Hop", "Accept", "X-Ok",
                        "Authorization", "Connection", "Trailer", "Proxy-Connection", "Proxy",
                        "Keep-Alive", "accept-encoding", "Range", "X-Original-URL",
                        "X-HTTP-Method-Override",
                    ]),
                    "[ -~]{0,12}",
                ),
                0..12,
            ),
            hop in any::<bool>(),
        ) {
            let mut given: Vec<(String, String)> =
                headers.iter().map(|(n, v)| ((*n).to_owned(), v.clone())).collect();
            if hop {
                given.push(("Connection".into(), "x-hop".into()));
            }
            let f = filter_request_headers(&given, UA);
            prop_assert_eq!(f.kept.len() + f.dropped.len(), given.len() + 2);
            let forbidden = |n: &str| {
                let n = n.to_ascii_lowercase();
                [
                    "host", "cookie", "via", "te", "upgrade", "connection", "trailer",
                    "keep-alive", "proxy", "range", "x-original-url", "x-http-method-override",
                ]
                .contains(&n.as_str())
                    || n.starts_with("proxy-")
                    || n.starts_with("x-forwarded-")
                    || n == "x-real-ip"
                    || (hop && n == "x-hop")
            };
            for (n, v) in &f.kept {
                prop_assert!(!forbidden(n), "{} kept", n);
                prop_assert!(!v.contains(['\r', '\n']));
            }
            let uas: Vec<_> = f.kept.iter().filter(|(n, _)| n.eq_ignore_ascii_case("user-agent")).collect();
            prop_assert_eq!(uas.len(), 1);
            prop_assert_eq!(uas[0].1.as_str(), UA);
            let encodings: Vec<_> = f.kept.iter().filter(|(n, _)| n.eq_ignore_ascii_case("accept-encoding")).collect();
            prop_assert_eq!(encodings.len(), 1);
            prop_assert_eq!(encodings[0].1.as_str(), "identity");
        }
    }
}

mod rewrite {
    use mcpwire_core::tunnel::harpoon::rewrite::{rewrite_body, rewrite_header, rewrite_json};
    use mcpwire_core::tunnel::harpoon::{Registry, TargetSource, TargetSpec};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn reg(entries: &[(&str, &str, Option<&str>)]) -> Registry {
        let mut r = Registry::new(true);
        for (label, url, role) in entries {
            r.register(TargetSpec {
                label: (*label).into(),
                url: (*url).into(),
                description: String::new(),
                source: match role {
                    Some(role) => TargetSource::OauthDiscovery {
                        role: (*role).into(),
                    },
                    None => TargetSource::Config,
                },
                tags: Vec::new(),
            })
            .unwrap();
        }
        r
    }

    #[test]
    fn authorization_server_metadata_is_rewritten_with_roles_deciding_shared_urls() {
        let r = reg(&[
            ("oauth-issuer-1", "https://as.internal", Some("issuer")),
            ("oauth-jwks-1", "https://as.internal", Some("jwks_uri")),
            (
                "oauth-token-1",
                "https://as.internal/token",
                Some("token_endpoint"),
            ),
        ]);
        let mut doc = json!({
            "issuer": "https://as.internal",
            "jwks_uri": "https://AS.internal",
            "token_endpoint": "https://as.internal/token",
            "authorization_endpoint": "https://as.internal/authorize",
            "nested": {"list": ["https://as.internal/token", 1, null]},
            "https://as.internal/token": "as a key",
        });
        assert_eq!(rewrite_json(&r, &mut doc), 5);
        assert_eq!(
            doc,
            json!({
                "issuer": "harpoon://oauth-issuer-1",
                "jwks_uri": "harpoon://oauth-jwks-1",
                "token_endpoint": "harpoon://oauth-token-1",
                "authorization_endpoint": "https://as.internal/authorize",
                "nested": {"list": ["harpoon://oauth-token-1", 1, null]},
                "harpoon://oauth-token-1": "as a key",
            })
        );
    }

    #[test]
    fn a_prm_resource_is_left_alone_and_its_authorization_servers_rewritten() {
        let r = reg(&[
            ("mcp", "https://mcp.internal/mcp", None),
            ("oauth-issuer-1", "https://as.internal", Some("issuer")),
        ]);
        let mut prm = json!({
            "resource": "https://mcp.internal/mcp",
            "authorization_servers": ["https://as.internal"],
        });
        rewrite_json(&r, &mut prm);
        assert_eq!(prm["resource"], "https://mcp.internal/mcp");
        assert_eq!(
            prm["authorization_servers"],
            json!(["harpoon://oauth-issuer-1"])
        );
    }

    #[test]
    fn a_resource_outside_a_prm_document_is_rewritten() {
        let r = reg(&[("mcp", "https://mcp.internal/mcp", None)]);
        let mut doc = json!({"resource": "https://mcp.internal/mcp", "other": 1});
        assert_eq!(rewrite_json(&r, &mut doc), 1);
        assert_eq!(doc["resource"], "harpoon://mcp");
        let mut nested = json!({"data": {"resource": "https://mcp.internal/mcp"},
                                "authorization_servers": []});
        rewrite_json(&r, &mut nested);
        assert_eq!(nested["data"]["resource"], "harpoon://mcp");
    }

    /// A JSON-typed body that does not parse still carries no registered URL out: they are
    /// replaced in its text, as written and with escaped slashes.
    #[test]
    fn an_unparsable_json_body_has_its_registered_urls_replaced_in_the_text() {
        let r = reg(&[
            ("short", "https://t.internal/x", None),
            ("long", "https://t.internal/x/y", None),
        ]);
        let body = br#"{"a": "https://t.internal/x/y", "b": "https:\/\/t.internal\/x", "c": [1,"#;
        let out = rewrite_body(&r, Some("application/json"), body).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a": "harpoon://long", "b": "harpoon://short", "c": [1,"#
        );
        let deep = format!(
            "{}\"https://t.internal/x\"{}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let out = rewrite_body(&r, Some("application/json"), deep.as_bytes()).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("t.internal"));
        // Without a registered URL in it, nothing changes.
        assert_eq!(rewrite_body(&r, Some("application/json"), b"{oops"), None);
    }

    #[test]
    fn bodies_other_than_json_and_json_with_nothing_to_rewrite_pass_unchanged() {
        let r = reg(&[("t", "https://t.internal/x", None)]);
        assert_eq!(
            rewrite_body(&r, Some("text/html"), b"https://t.internal/x"),
            None
        );
        assert_eq!(
            rewrite_body(&r, None, br#"{"a":"https://t.internal/x"}"#),
            None
        );
        assert_eq!(
            rewrite_body(&r, Some("application/json"), br#"{"a": "other"}"#),
            None
        );
        assert_eq!(
            rewrite_body(&r, Some("application/json"), b"not json"),
            None
        );
        let out = rewrite_body(
            &r,
            Some("application/problem+json; charset=utf-8"),
            br#"{"a": "https://t.internal/x"}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap(),
            json!({"a": "harpoon://t"})
        );
    }

    #[test]
    fn location_content_location_and_link_are_rewritten() {
        let r = reg(&[
            ("a", "https://a.internal/next", None),
            ("b", "https://b.internal/", None),
        ]);
        assert_eq!(
            rewrite_header(&r, "Location", "https://A.internal/next").as_deref(),
            Some("harpoon://a")
        );
        assert_eq!(
            rewrite_header(&r, "content-location", "https://b.internal/").as_deref(),
            Some("harpoon://b")
        );
        assert_eq!(rewrite_header(&r, "Location", "https://elsewhere/"), None);
        assert_eq!(rewrite_header(&r, "X-Other", "https://b.internal/"), None);
        assert_eq!(
            rewrite_header(
                &r,
                "Link",
                r#"<https://a.internal/next>; rel="next", <https://x/>; rel=prev, <https://b.internal/>"#
            )
            .as_deref(),
            Some(r#"<harpoon://a>; rel="next", <https://x/>; rel=prev, <harpoon://b>"#)
        );
        assert_eq!(
            rewrite_header(&r, "Link", "<https://x/>; rel=next, <broken"),
            None
        );
    }

    const URLS: [&str; 4] = [
        "https://as.internal",
        "https://as.internal/token",
        "http://10.0.0.5:8080/jwks",
        "https://api.internal/v1?x=1",
    ];
    const KEYS: [&str; 7] = [
        "issuer",
        "token_endpoint",
        "jwks_uri",
        "authorization_servers",
        "resource",
        "other",
        "https://as.internal/token",
    ];

    /// A URL of [`URLS`], its scheme and host in the case `flip` picks, or another string.
    fn string() -> impl Strategy<Value = String> {
        prop_oneof![
            (0..URLS.len(), any::<u16>()).prop_map(|(i, flip)| {
                let u = URLS[i];
                let (scheme_host, rest) = match u[8..].find(['/', '?']) {
                    Some(p) => u.split_at(8 + p),
                    None => (u, ""),
                };
                let recased: String = scheme_host
                    .chars()
                    .enumerate()
                    .map(|(j, c)| {
                        if flip >> (j % 16) & 1 == 1 {
                            c.to_ascii_uppercase()
                        } else {
                            c
                        }
                    })
                    .collect();
                format!("{recased}{rest}")
            }),
            "[a-z:/.]{0,12}",
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            string().prop_map(Value::String),
            any::<i32>().prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec(
                    (
                        prop_oneof![
                            prop::sample::select(KEYS.to_vec()).prop_map(String::from),
                            string()
                        ],
                        inner
                    ),
                    0..5
                )
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn strings<'a>(v: &'a Value, top: bool, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| strings(x, false, out)),
            Value::Object(m) => {
                for (k, x) in m {
                    out.push(k);
                    if !(top && k == "resource" && x.is_string()) {
                        strings(x, false, out);
                    }
                }
            }
            _ => {}
        }
    }

    proptest! {
        #[test]
        fn no_registered_url_survives_a_rewrite_anywhere(mut doc in json_value()) {
            let r = reg(&[
                ("oauth-issuer-1", URLS[0], Some("issuer")),
                ("oauth-jwks-1", URLS[0], Some("jwks_uri")),
                ("oauth-token-1", URLS[1], Some("token_endpoint")),
                ("jwks", URLS[2], None),
                ("api", URLS[3], None),
            ]);
            let before = doc.clone();
            // Only a PRM document's top-level resource is kept: one with a member only RFC
            // 9728 defines.
            let prm = before.as_object().is_some_and(|m| {
                ["authorization_servers", "bearer_methods_supported", "resource_name"]
                    .iter()
                    .any(|k| m.contains_key(*k))
            });
            let n = rewrite_json(&r, &mut doc);
            let mut left = Vec::new();
            strings(&doc, prm, &mut left);
            for s in left {
                prop_assert_eq!(r.find_url(s).count(), 0, "{} survived", s);
            }
            if n == 0 {
                prop_assert_eq!(doc, before);
            }
        }
    }
}

mod call {
    use std::time::Duration;

    use mcpwire_core::tunnel::harpoon::call::{
        error_result, next_hop, CallError, CallOutcome, CallRequest, Hop, Method, RedirectRefused,
    };
    use mcpwire_core::tunnel::harpoon::{Registry, TargetSource, TargetSpec};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn reg() -> Registry {
        let mut r = Registry::new(false);
        for (label, url) in [
            ("api", "https://api.internal/v1/things"),
            ("next", "https://api.internal/v1/next"),
            ("other-host", "https://other.internal/landing"),
        ] {
            r.register(TargetSpec {
                label: label.into(),
                url: url.into(),
                description: String::new(),
                source: TargetSource::Config,
                tags: Vec::new(),
            })
            .unwrap();
        }
        r
    }

    fn req(args: Value) -> Result<CallRequest, CallError> {
        CallRequest::from_arguments(&args, &reg(), 1024 * 1024, 5)
    }

    #[test]
    fn defaults_and_a_full_request() {
        let r = req(json!({"label": "api"})).unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.timeout, Duration::from_secs(30));
        assert_eq!(r.max_response_bytes, 100 * 1024);
        assert!(r.follow_redirects);
        assert_eq!(r.max_redirects, 5);
        let r = req(json!({
            "label": "api", "method": "put", "headers": {"Accept": "application/json"},
            "body": "{}", "timeout_ms": 100, "max_response_bytes": 1024 * 1024,
            "follow_redirects": false, "max_redirects": 0,
        }))
        .unwrap();
        assert_eq!(r.method, Method::Put);
        assert_eq!(
            r.headers,
            [("Accept".to_owned(), "application/json".to_owned())]
        );
        assert_eq!(r.body.as_deref(), Some("{}"));
        assert_eq!(r.timeout, Duration::from_millis(100));
        assert!(!r.follow_redirects);
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("application/json"),
            "Debug shows no header value: {shown}"
        );
        // A cap below the default lowers the default.
        let small = CallRequest::from_arguments(&json!({"label": "api"}), &reg(), 4096, 2).unwrap();
        assert_eq!(small.max_response_bytes, 4096);
        // --harpoon.max-redirects is a call's default and its cap (the Go client's rule).
        assert_eq!(small.max_redirects, 2);
        let over = CallRequest::from_arguments(
            &json!({"label": "api", "max_redirects": 3}),
            &reg(),
            4096,
            2,
        );
        assert!(over.is_err(), "{over:?}");
        let wide = CallRequest::from_arguments(
            &json!({"label": "api", "max_redirects": 20}),
            &reg(),
            4096,
            20,
        )
        .unwrap();
        assert_eq!(wide.max_redirects, 20);
    }

    #[test]
    fn bad_arguments_say_which_and_why() {
        for (args, says) in [
            (json!("api"), "at least \"label\""),
            (json!({}), "at least \"label\""),
            (
                json!({"label": "nope"}),
                "no harpoon target is labelled 'nope'",
            ),
            (
                json!({"label": "api", "method": "DELETE"}),
                "\"method\" must be GET, POST or PUT",
            ),
            (
                json!({"label": "api", "timeout_ms": 99}),
                "\"timeout_ms\" must be a whole number from 100 to 120000",
            ),
            (
                json!({"label": "api", "timeout_ms": 120_001}),
                "from 100 to 120000",
            ),
            (
                json!({"label": "api", "max_response_bytes": 2 * 1024 * 1024}),
                "\"max_response_bytes\" must be a whole number from 1 to 1048576",
            ),
            (
                json!({"label": "api", "max_redirects": 6}),
                "\"max_redirects\"",
            ),
            (
                json!({"label": "api", "headers": {"A": 1}}),
                "\"headers\" must map each name to a string",
            ),
            (
                json!({"label": "api", "body": "x"}),
                "\"body\" is for POST and PUT",
            ),
            (
                json!({"label": "api", "follow_redirects": "yes"}),
                "true or false",
            ),
            (
                json!({"label": "api", "url": "https://evil/"}),
                "takes no \"url\"",
            ),
            (
                json!({"label": "api", "path": "/admin"}),
                "takes no \"path\"",
            ),
        ] {
            let e = req(args.clone()).unwrap_err().to_string();
            assert!(e.contains(says), "{args}: {e}");
        }
    }

    #[test]
    fn redirects_go_only_to_registered_urls_within_the_count() {
        let r = reg();
        let call = req(json!({"label": "api", "max_redirects": 2})).unwrap();
        let here = "https://api.internal/v1/things";
        let label = |h: Hop<'_>| match h {
            Hop::Follow(t) => t.label().to_owned(),
            other => format!("{other:?}"),
        };
        assert_eq!(
            label(next_hop(
                &r,
                &call,
                here,
                Some("https://API.internal/v1/next"),
                0
            )),
            "next"
        );
        assert_eq!(
            label(next_hop(&r, &call, here, Some("/v1/next"), 0)),
            "next"
        );
        assert_eq!(label(next_hop(&r, &call, here, Some("next"), 1)), "next");
        assert_eq!(
            label(next_hop(
                &r,
                &call,
                here,
                Some("https://other.internal/landing"),
                1
            )),
            "other-host"
        );
        assert_eq!(
            next_hop(&r, &call, here, Some("https://api.internal/v1/admin"), 0),
            Hop::Refuse(RedirectRefused::NotRegistered)
        );
        assert_eq!(
            next_hop(
                &r,
                &call,
                here,
                Some("https://api.internal/v1/x/../next"),
                0
            ),
            Hop::Refuse(RedirectRefused::NotRegistered),
            "a dot segment is not resolved into a registered URL"
        );
        assert_eq!(
            next_hop(&r, &call, here, Some("http://api.internal/v1/next"), 0),
            Hop::Refuse(RedirectRefused::NotRegistered),
            "no downgrade to http"
        );
        assert_eq!(
            next_hop(&r, &call, here, Some("/v1/next"), 2),
            Hop::Refuse(RedirectRefused::TooMany)
        );
        assert_eq!(
            next_hop(&r, &call, here, None, 0),
            Hop::Refuse(RedirectRefused::NoLocation)
        );
        let off = req(json!({"label": "api", "follow_redirects": false})).unwrap();
        assert_eq!(next_hop(&r, &off, here, Some("/v1/next"), 0), Hop::Return);
    }

    #[test]
    fn results_as_the_tool_returns_them() {
        let out = CallOutcome {
            status: 200,
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("Set-Thing".into(), "a".into()),
                ("set-thing".into(), "b".into()),
            ],
            body: b"{\"ok\":true}".to_vec(),
        };
        let result = out.to_result();
        insta::assert_snapshot!(
            "harpoon_call_result",
            serde_json::to_string_pretty(&result).unwrap()
        );
        let text = result["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            result["structuredContent"]
        );
        insta::assert_snapshot!(
            "harpoon_call_error",
            serde_json::to_string_pretty(&error_result(
                "api",
                "the response body is over max_response_bytes (102400)"
            ))
            .unwrap()
        );
    }

    proptest! {
        #[test]
        fn arguments_never_panic_and_a_request_names_a_registered_label(
            label in prop::sample::select(vec!["api", "next", "nope", ""]),
            method in prop::option::of("[A-Za-z]{0,6}"),
            timeout in prop::option::of(0u64..200_000),
            max_redirects in prop::option::of(0u64..40),
        ) {
            let mut args = json!({"label": label});
            if let Some(m) = method { args["method"] = json!(m); }
            if let Some(t) = timeout { args["timeout_ms"] = json!(t); }
            if let Some(m) = max_redirects { args["max_redirects"] = json!(m); }
            if let Ok(r) = req(args) {
                prop_assert!(reg().get(&r.label).is_some());
                prop_assert!((100..=120_000).contains(&r.timeout.as_millis()));
                prop_assert!(r.max_redirects <= 5);
            }
        }
    }
}

mod tools {
    use mcpwire_core::tunnel::harpoon::tools::{definitions, list_targets, oauth_target_audience};
    use mcpwire_core::tunnel::harpoon::{Registry, TargetSource, TargetSpec};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn spec(label: &str, url: &str, role: Option<&str>, tags: &[&str]) -> TargetSpec {
        TargetSpec {
            label: label.into(),
            url: url.into(),
            description: format!("the {label} one"),
            source: role.map_or(TargetSource::Config, |r| TargetSource::OauthDiscovery {
                role: r.into(),
            }),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn reg() -> Registry {
        let mut r = Registry::new(false);
        for s in [
            spec(
                "oauth-token-1",
                "https://as.internal/token",
                Some("token_endpoint"),
                &[],
            ),
            spec(
                "oauth-jwks-1",
                "https://as.internal/jwks",
                Some("jwks_uri"),
                &[],
            ),
            spec(
                "crm",
                "https://crm.internal/api",
                None,
                &["CRM", " Sales ", "crm"],
            ),
            spec(
                "with-user",
                "https://u:p@as.internal/token2",
                None,
                &["token-endpoint"],
            ),
            spec(
                "with-fragment",
                "https://as.internal/token3#x",
                None,
                &["token-endpoint"],
            ),
        ] {
            r.register(s).unwrap();
        }
        r
    }

    fn labels(result: &Value) -> Vec<String> {
        result["structuredContent"]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["label"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn list_targets_filters_and_never_shows_a_url() {
        let r = reg();
        let all = list_targets(&r, &json!({})).unwrap();
        assert_eq!(labels(&all).len(), 5);
        let text = all.to_string();
        assert!(!text.contains("internal"), "no URL or host in {text}");
        let crm = &all["structuredContent"]["targets"][2];
        assert_eq!(
            *crm,
            json!({"label": "crm", "description": "the crm one", "category": "custom",
                   "source": "config", "tags": ["crm", "sales"], "methods": ["GET", "POST", "PUT"]})
        );
        assert_eq!(
            labels(&list_targets(&r, &json!({"category": "oauth"})).unwrap()),
            ["oauth-token-1", "oauth-jwks-1"]
        );
        assert_eq!(
            labels(
                &list_targets(
                    &r,
                    &json!({"source": "oauth_discovery", "tags": ["token-endpoint"]})
                )
                .unwrap()
            ),
            ["oauth-token-1"]
        );
        assert_eq!(
            labels(&list_targets(&r, &json!({"tags": ["SALES", "crm"]})).unwrap()),
            ["crm"]
        );
        assert!(list_targets(&r, &json!({"tags": "crm"})).is_err());
        assert!(list_targets(&r, &json!({"url": "x"})).is_err());
        assert_eq!(labels(&list_targets(&r, &Value::Null).unwrap()).len(), 5);
    }

    #[test]
    fn the_audience_is_a_token_endpoints_exact_url_and_nothing_else() {
        let r = reg();
        let a = oauth_target_audience(&r, &json!({"label": "oauth-token-1"})).unwrap();
        assert_eq!(
            a["structuredContent"]["audience"],
            "https://as.internal/token"
        );
        for (label, says) in [
            ("oauth-jwks-1", "not a token endpoint"),
            ("crm", "not a token endpoint"),
            ("with-user", "userinfo"),
            ("with-fragment", "fragment"),
            ("nope", "no harpoon target is labelled 'nope'"),
        ] {
            let e = oauth_target_audience(&r, &json!({"label": label}))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{label}: {e}");
            assert!(!e.contains("internal"), "no URL in {e}");
        }
    }

    #[test]
    fn tool_definitions() {
        insta::assert_snapshot!(
            "harpoon_tools",
            serde_json::to_string_pretty(&definitions(1 << 20, 5)).unwrap()
        );
    }

    proptest! {
        #[test]
        fn no_filter_ever_shows_a_url(
            hosts in proptest::collection::vec("[a-z]{3,8}", 1..6),
            category in prop::option::of(prop::sample::select(vec!["oauth", "custom", "x"])),
            tag in prop::option::of(prop::sample::select(vec!["oauth", "token-endpoint", "crm"])),
        ) {
            let mut r = Registry::new(false);
            for (i, h) in hosts.iter().enumerate() {
                let role = (i % 2 == 0).then_some("token_endpoint");
                let _ = r.register(spec(&format!("t{i}"), &format!("https://{h}.secret.example/p{i}"), role, &["crm"]));
            }
            let mut args = json!({});
            if let Some(c) = category { args["category"] = json!(c); }
            if let Some(t) = tag { args["tags"] = json!([t]); }
            let out = list_targets(&r, &args).unwrap().to_string();
            prop_assert!(!out.contains("secret.example"));
        }
    }
}

mod discovery {
    use std::net::IpAddr;

    use mcpwire_core::tunnel::harpoon::discovery::{discovered_targets, HostFilter, Inclusion};
    use mcpwire_core::tunnel::harpoon::Registry;
    use serde_json::json;

    fn filter() -> HostFilter {
        HostFilter {
            include_loopback: true,
            include_private: true,
            suffixes: vec![".corp.example".into()],
            patterns: vec![regex_lite::Regex::new(r"idp-[0-9]+\.example\.net").unwrap()],
            mcp_host: "mcp.example.com".into(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn hosts_are_classified_by_each_switch() {
        let f = filter();
        assert_eq!(f.classify("127.0.0.1", &[]), Some(Inclusion::Loopback));
        assert_eq!(f.classify("[::1]", &[]), Some(Inclusion::Loopback));
        assert_eq!(f.classify("localhost", &[]), Some(Inclusion::Loopback));
        assert_eq!(f.classify("10.1.2.3", &[]), Some(Inclusion::Private));
        assert_eq!(f.classify("fd00::1", &[]), Some(Inclusion::Private));
        assert_eq!(
            f.classify("as.lan", &[ip("192.168.1.5")]),
            Some(Inclusion::Private)
        );
        assert_eq!(
            f.classify("as.lan", &[ip("192.168.1.5"), ip("8.8.8.8")]),
            None,
            "all must be private"
        );
        assert_eq!(f.classify("MCP.example.com", &[]), Some(Inclusion::McpHost));
        assert_eq!(
            f.classify("auth.mcp.example.com", &[ip("8.8.8.8")]),
            Some(Inclusion::McpHost)
        );
        assert_eq!(
            f.classify("evilmcp.example.com", &[ip("8.8.8.8")]),
            None,
            "a subdomain, not a suffix"
        );
        assert_eq!(
            f.classify("sso.corp.example", &[ip("8.8.8.8")]),
            Some(Inclusion::Suffix)
        );
        assert_eq!(
            f.classify("idp-42.example.net", &[ip("8.8.8.8")]),
            Some(Inclusion::Pattern)
        );
        assert_eq!(
            f.classify("x.idp-42.example.net", &[ip("8.8.8.8")]),
            None,
            "the whole name"
        );
        assert_eq!(f.classify("169.254.169.254", &[]), None, "link-local never");
        assert_eq!(f.classify("8.8.8.8", &[]), None);
        assert_eq!(
            f.classify("public.example", &[]),
            None,
            "unresolved: nothing to go by"
        );
        let off = HostFilter {
            include_loopback: false,
            include_private: false,
            ..filter()
        };
        assert_eq!(off.classify("127.0.0.1", &[]), None);
        assert_eq!(off.classify("localhost", &[]), None);
        assert_eq!(off.classify("10.1.2.3", &[]), None);
    }

    #[test]
    fn endpoints_become_labelled_targets_and_the_authorization_endpoint_never_does() {
        let meta = [
            json!({
                "issuer": "http://127.0.0.1:9000",
                "authorization_endpoint": "http://127.0.0.1:9000/authorize",
                "token_endpoint": "http://127.0.0.1:9000/token",
                "registration_endpoint": "http://127.0.0.1:9000/register",
                "revocation_endpoint": "https://public.example/revoke",
                "jwks_uri": "http://127.0.0.1:9000/jwks",
            }),
            json!({"issuer": "https://auth.mcp.example.com", "token_endpoint": "https://auth.mcp.example.com/t"}),
        ];
        let specs = discovered_targets(&meta, &filter(), |_| vec![ip("8.8.8.8")]);
        let labels: Vec<_> = specs.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "oauth-token-1",
                "oauth-registration-1",
                "oauth-jwks-1",
                "oauth-issuer-1",
                "oauth-token-2",
                "oauth-issuer-2"
            ]
        );
        assert!(specs
            .iter()
            .all(|s| !s.url.contains("authorize") && !s.url.contains("public.example")));
        let mut reg = Registry::new(true);
        for s in specs {
            reg.register(s).unwrap();
        }
        assert!(reg.get("oauth-token-1").unwrap().is_token_endpoint());
        assert!(reg
            .get("oauth-jwks-1")
            .unwrap()
            .tags()
            .contains(&"jwks-uri".to_owned()));
        assert_eq!(reg.get("oauth-issuer-1").unwrap().category(), "oauth");
    }
}
